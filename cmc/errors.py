"""One hierarchy of the errors cmc reports to a person (docs/errors.md; the exit
statuses: docs/cmc.md, "Exit statuses").

Each class says, as class attributes, what a run that raises it ends with:
`exit_status` (the process's status) and `kind` (the JSON report's `error.kind`,
docs/cmc.md). cli.py takes both from the error it catches; nothing else maps a class
or a status to a kind.

| class              | kind      | exit | what went wrong                                |
|--------------------|-----------|------|------------------------------------------------|
| UsageError         | "usage"   | 2    | the command line, or a trace given to --replay |
| ModelError         | "model"   | 2    | the model file, a -D value, the build          |
| TargetError        | "target"  | 3    | the program under check misbehaved             |
| EngineError        | "engine"  | 3    | a cap or limit, or a replay that diverged      |
| UnsupportedMachine | "machine" | 4    | this machine cannot run cmc                    |

(An interrupted run, 130, is no error of these: cli.py reports it itself.) Any other
exception is a bug in cmc, and shows its traceback.
"""
from __future__ import annotations


class CmcError(Exception):
    """Base of every error cmc reports to a person; only its subclasses are raised,
    and each sets `kind` and `exit_status`."""

    kind: str
    exit_status: int


class UsageError(CmcError):
    """The command line is wrong: an unknown or ill-formed option, options that do not
    go together, a `-D` without `=`, or a trace for `--replay` that cannot be read or
    does not belong to the model. Raised before the search starts; the message names
    the option. The user fixes the command line (`cmc --help`, docs/cmc.md)."""

    kind = "usage"
    exit_status = 2


class ModelError(CmcError):
    """The model file (or a `-D` value) is wrong: syntax, an unknown name, a type error,
    a build command that fails, a binary that is not there, a property that cannot be
    evaluated in a world. Raised by the language while loading, or during the search.
    Carries a location so it renders as ``FILE:LINE:COL: message`` with the line and a
    caret; the user fixes the file there (docs/errors.md lists every message)."""

    kind = "model"
    exit_status = 2

    def __init__(self, message: str, file: str | None = None, line: int | None = None,
                 col: int | None = None, source_line: str | None = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        self.source_line = source_line

    def render(self) -> str:
        if self.file is None or self.line is None:
            where = f"{self.file}: " if self.file else ""
            return f"{where}{self.message}"
        col = self.col or 1
        out = f"{self.file}:{self.line}:{col}: {self.message}"
        if self.source_line is not None:
            text = self.source_line.rstrip("\n")
            pad = "".join("\t" if ch == "\t" else " " for ch in text[:col - 1])
            out += f"\n    {text}\n    {pad}^"
        return out

    def __str__(self) -> str:
        return self.render()


class TargetError(CmcError):
    """The program under check misbehaved: it died outside a CRASH action, ran past the
    watchdog, wrote invalid JSON on fd 3/193, or made a call cmc does not support.
    Raised by the kernel during a step; the message names the node, the step and the
    call. It is a finding about the program: the user fixes the program, or keeps it
    within docs/target-contract.md."""

    kind = "target"
    exit_status = 3


class EngineError(CmcError):
    """The search cannot go on faithfully: a cap was exceeded (`--max-states`,
    `--channel-cap`), a world could not be copied, or a replay diverged from the world
    it was meant to reach (the program, or cmc, is not deterministic). Raised by the
    engine or the kernel; the message says which, and the user raises the cap, lowers
    the budgets, or makes the program deterministic (docs/errors.md)."""

    kind = "engine"
    exit_status = 3


class UnsupportedMachine(CmcError):
    """This machine cannot run cmc: not Linux on x86_64, or a kernel without seccomp
    user notification. Raised before the search starts, or when the first node cannot
    start under the filter; the user runs cmc on a machine that meets README.md's
    requirements."""

    kind = "machine"
    exit_status = 4


class NotForkable(Exception):
    """A world that cannot be copied faithfully by forking its processes (--fast): not
    an error a person sees; the engine replays that world from launch instead, and
    `--json` counts why (docs/design.md, "Copying a world instead of replaying it")."""
