"""One hierarchy of errors, each mapped to one exit status by cli.py (SPEC §6).

- ModelError: the user's model file or command line is wrong (exit 2). Carries a
  location so it renders as ``FILE:LINE:COL: message`` with the line and a caret.
- TargetError: the program under check misbehaved or asked for something cmc does
  not support (exit 3). Names the node, the step and the call.
- EngineError: a limit or cap was exceeded, or the replay diverged (exit 3).
- UnsupportedMachine: this machine cannot run cmc (exit 4).

Any other exception is a bug in cmc itself, and shows its traceback.
"""
from __future__ import annotations


class CmcError(Exception):
    """Base of every error cmc reports to a person."""

    exit_status = 3


class ModelError(CmcError):
    """The model file (or a -D value) is wrong: syntax, unknown name, type error."""

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


class UsageError(CmcError):
    """The command line is wrong (exit 2)."""

    exit_status = 2


class TargetError(CmcError):
    """The program under check misbehaved (exit 3): died outside a CRASH, ran past the
    watchdog, wrote invalid JSON on fd 3/193, or made an unsupported call."""

    exit_status = 3


class EngineError(CmcError):
    """A cap or limit was exceeded, or a replay diverged (nondeterminism) (exit 3)."""

    exit_status = 3


class UnsupportedMachine(CmcError):
    """This machine cannot run cmc: not Linux x86_64, or no seccomp user notification."""

    exit_status = 4

