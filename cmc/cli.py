"""The command line (docs/cmc.md, "Options"): the options, their validation, and the
exit status; the only place that exits. Running the check is cmc/check.py's.

Exit statuses (docs/cmc.md, "Exit statuses"): 0 every property holds, 1 a property is
violated, 2 usage or model-file error, 3 target or engine error, 4 this machine cannot
run cmc, 130 interrupted. `--tlc-exit-codes` maps them to TLC's (see tlc_status).
"""
from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import signal
import sys
import time

from . import __version__
from .adapter import PropertyEvaluationError
from .check import (DEFAULT_CHANNEL_CAP, DEFAULT_LIVE_STEPS, DEFAULT_WALKS, Run, check,
                    keep_outputs)
from .argparsing import ArgParser, count
from .errors import CmcError, ModelError, UsageError
from .maelstrom_cmd import maelstrom_argv
from .report import json as json_report
from .report import junit as junit_report
from .report.tlc import render_evaluated_in, violation_lines
from .interrupts import drop_interrupts, hold_interrupts
from .resources import parse_size
from .scratch import remove_all

EXIT_OK, EXIT_VIOLATION, EXIT_MODEL = 0, 1, 2
EXIT_INTERRUPTED = 130

# TLC's ExitStatus (tlc2/output/EC.java): ERROR_SPEC_PARSE 150, ERROR_CONFIG_PARSE 151,
# ERROR 255; a violation's is its property kind's (engine.model.PropertyKind).


def tlc_status(status: int, kind=None, load_error: bool = False) -> int:
    """cmc's exit status as TLC's. A violation's is that of the kind of property
    violated (PropertyKind.tlc_status). A model file that cannot be loaded is TLC's
    spec parse error (150); any other exit-2 error (the command line, the build, a
    missing binary, an evaluation error) is 151."""
    if status == EXIT_OK:
        return 0
    if status == EXIT_VIOLATION:
        return kind.tlc_status if kind is not None else 255
    if status == EXIT_MODEL:
        return 150 if load_error else 151
    return 255


def parse_args(argv):
    p = ArgParser(prog="cmc", description="Model-check the real binaries of a distributed "
                   "system (docs/cmc.md).", epilog="Maelstrom nodes: cmc maelstrom WORKLOAD "
                   "--bin CMD [--node-count N] (or Maelstrom's spelling, cmc maelstrom test "
                   "-w WORKLOAD --bin CMD ...) writes the workload's model and checks it; "
                   "cmc maelstrom --help lists its options (docs/maelstrom.md).")
    p.add_argument("--model-file", metavar="FILE", help="the model file (with --replay: "
                   "the trace's model by default)")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="name=value",
                   help="override a param of the model file")
    p.add_argument("--ray", metavar="ADDRESS",
                   help="run the workers as Ray actors: local (a Ray instance for this "
                   "run), auto (this machine's cluster) or ray://HOST:PORT")
    p.add_argument("--workers", type=count(1), default=1, metavar="N",
                   help="breadth-first search with N replay worker processes (same counts "
                   "and counterexample as one)")
    copying = p.add_mutually_exclusive_group()
    copying.add_argument("--fast", dest="fast", action="store_true", default=None,
                         help="copy worlds by forking their processes (the default of "
                         "breadth- and depth-first search)")
    copying.add_argument("--no-fast", dest="fast", action="store_false",
                         help="replay every world from launch instead of copying it (the "
                         "same verdicts, counts and counterexamples, slower)")
    p.add_argument("--check-merges", action="store_true",
                   help="when a world is reached again by another path, take every action "
                   "from it along that path too, and require the same worlds (a gate on "
                   "the state the program declares; breadth-first, one worker)")
    p.add_argument("--por", action="store_true",
                   help="partial-order reduction: skip transitions whose outcome another "
                   "order already gives (the same worlds, verdicts and counterexample "
                   "lengths; fewer states generated; breadth-first)")
    p.add_argument("--check-por", action="store_true",
                   help="with --por: also take every transition skipped and require that "
                   "it lead to a world the reduced search reached (a test of the reduction)")
    p.add_argument("--max-depth", type=count(1), metavar="D",
                   help="do not expand worlds at depth D (the initial world is depth 1); "
                   "with --simulate, the length of a walk (default 100)")
    p.add_argument("--dfs", type=count(1), metavar="D", help="depth-first, to depth D")
    p.add_argument("--seconds", type=_positive, metavar="S",
                   help="breadth-first for half of S seconds, then (if it has not ended) "
                   "swarm walks from its frontier for the rest; say how "
                   "far the search got (exit 0 when it found nothing)")
    p.add_argument("--simulate", action="store_true", help="seeded random walks")
    p.add_argument("--swarm", action="store_true",
                   help="with --simulate: each walk with its own weights of actions and "
                   "nodes and caps on faults, drawn from its seed (swarm testing)")
    p.add_argument("--seed", type=int, metavar="S",
                   help="with --simulate, or --seconds' walks: walk i uses seed S+i")
    p.add_argument("--walks", type=count(1), metavar="W",
                   help=f"with --simulate: how many walks (default {DEFAULT_WALKS})")
    p.add_argument("--replay", metavar="TRACE.json", help="run a written trace again")
    p.add_argument("--det", action="store_true",
                   help="take every step twice from a fresh launch and compare")
    p.add_argument("--trace-ticks", action="store_true",
                   help="time virtual: show in a trace the FIREs folded into each step")
    p.add_argument("--trace-out", metavar="TRACE.json",
                   help="where to write a violation's trace (default MODEL.trace.json)")
    p.add_argument("--json", metavar="REPORT.json", help="also write the verdict as JSON "
                   "(-: to stdout, and the text to stderr)")
    p.add_argument("--junit", metavar="REPORT.xml",
                   help="also write the verdict as JUnit XML: a test case per property")
    p.add_argument("--out", metavar="DIR",
                   help="keep the run's outputs in DIR/MODEL/TIME/ (the JSON report, the "
                   "trace and page of a violation, each node's output), DIR/MODEL/latest "
                   "its link")
    # cmc maelstrom's: the folder under --out is the workload's, as in Maelstrom's store/
    p.add_argument("--out-test", metavar="NAME", help=argparse.SUPPRESS)
    p.add_argument("--coverage", action="store_true",
                   help="print all of the coverage (steps per node, budgets, worlds)")
    p.add_argument("--strict", action="store_true",
                   help="a vacuity finding (a client that never connected, a property "
                   "that held only vacuously...) is an error: exit 1")
    p.add_argument("--html", metavar="REPORT.html",
                   help="on a violation, also write the counterexample as a self-contained "
                   "page (message-sequence chart, world and node output per step)")
    p.add_argument("--live-steps", type=count(0), metavar="K",
                   help=f"steps of the fair schedule for eventually (default {DEFAULT_LIVE_STEPS})")
    p.add_argument("--max-states", type=count(1), metavar="N",
                   help="more distinct states than N is an error (exit 3)")
    p.add_argument("--channel-cap", type=count(1), metavar="N",
                   help=f"more messages than N in flight on a channel is an error (exit 3; "
                   f"default {DEFAULT_CHANNEL_CAP})")
    p.add_argument("--max-memory", type=_size, metavar="SIZE",
                   help="the most memory plus scratch space the run may take, e.g. 4G "
                   "(default: half of the memory available at start; exit 3 before it)")
    p.add_argument("--scratch", metavar="DIR",
                   help="where the nodes' directories go (default: $TMPDIR if set, else "
                   "/dev/shm)")
    p.add_argument("--watchdog", type=float, default=10.0, metavar="SECONDS",
                   help="real time a node may run in one step (default 10)")
    p.add_argument("--no-build", action="store_true", help="skip the model's build command")
    p.add_argument("--no-pin", action="store_true",
                   help="do not run each search process and its nodes on one CPU")
    p.add_argument("--tlc-exit-codes", action="store_true", help="exit with TLC's statuses")
    p.add_argument("--version", action="version", version=f"cmc {__version__}")
    args = p.parse_args(argv)
    _validate(args)
    return args


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _validate(args) -> None:
    def usage(message):
        return UsageError(f"cmc: {message}")
    if args.replay is None and args.model_file is None:
        raise usage("the following arguments are required: --model-file")
    if args.check_por and not args.por:
        raise usage("--check-por checks the reduction of --por: give --por too")
    if args.por and (args.dfs is not None or args.simulate or args.replay
                     or args.ray is not None or args.check_merges):
        raise usage("--por goes with breadth-first search, of one worker or --workers N "
                    "(not with --dfs, --simulate, --replay, --ray or --check-merges)")
    if args.check_por and args.workers > 1:
        raise usage("--check-por goes with one worker (not with --workers)")
    if args.seconds is not None and (args.dfs is not None or args.simulate or args.replay):
        raise usage("--seconds bounds a breadth-first search (not with --dfs, --simulate "
                    "or --replay)")
    if args.dfs is not None and args.simulate:
        raise usage("--dfs and --simulate are two different searches: choose one")
    if args.replay is not None and (args.dfs is not None or args.simulate):
        raise usage("--replay runs a written trace; it does not search (drop --dfs/--simulate)")
    if args.dfs is not None and args.max_depth is not None:
        raise usage("--dfs D is the depth bound of the depth-first search; drop --max-depth")
    if not args.simulate and args.walks is not None:
        raise usage("--walks goes with --simulate")
    if not args.simulate and args.seed is not None and args.seconds is None:
        raise usage("--seed goes with --simulate or --seconds")
    if args.swarm and not args.simulate:
        raise usage("--swarm goes with --simulate (--seconds' walks are a swarm already)")
    if args.out is not None and os.path.exists(args.out) and not os.path.isdir(args.out):
        raise usage(f"argument --out: {args.out} is not a directory")
    if args.scratch is not None and not os.path.isdir(args.scratch):
        raise usage(f"argument --scratch: {args.scratch} is not a directory")
    if args.watchdog <= 0:
        raise usage(f"argument --watchdog: must be positive, got {args.watchdog:g}")
    if args.fast and args.simulate:
        raise usage("--fast applies to breadth-first and depth-first search (not to "
                    "--simulate, which replays every walk)")
    if args.ray is not None and (args.dfs is not None or args.simulate or args.replay):
        raise usage("--ray runs the workers of a breadth-first search (not with --dfs, "
                    "--simulate or --replay)")
    if args.ray is not None and importlib.util.find_spec("ray") is None:
        raise usage("--ray needs Ray, which is not installed: pip install 'cmc[ray]'")
    if args.check_merges and (args.dfs is not None or args.simulate or args.replay
                              or args.workers > 1 or args.ray is not None):
        raise usage("--check-merges goes with breadth-first search of one worker (not with "
                    "--dfs, --simulate, --replay or --workers)")
    if args.fast is None:
        # Copying is the default of the searches (docs/cmc.md, "Options", --no-fast);
        # a walk and --replay run from launch.
        args.fast = args.replay is None and not args.simulate


def _terminate(signum, frame):
    raise KeyboardInterrupt


_ENDING = []


def _first_interrupt(signum, frame):
    """The program's handler of Ctrl-C and SIGTERM: the first ends the run (as a
    KeyboardInterrupt, wherever Python is); the ones after it, which can only ask for
    the same, are dropped, so that none lands in the handling of the first (a Ctrl-C
    pressed twice, a supervisor that signals every few ms: seen in CI)."""
    if not _ENDING:
        _ENDING.append(signum)
        raise KeyboardInterrupt


def _json_path(argv) -> str | None:
    """--json's value, found without argparse: a usage error is reported there too."""
    for i, arg in enumerate(argv):
        if arg == "--json" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--json="):
            return arg.split("=", 1)[1]
    return None


def _report(run: Run, status: int, error: str | None, kind: str | None) -> dict:
    """The JSON report of the run as it ended."""
    args = run.args
    simulate = args is not None and args.simulate
    live_steps = args.live_steps if args is not None else None
    return json_report.report(
        mode=run.mode, exit_status=status, elapsed=time.time() - run.started, model=run.model,
        outcome=run.outcome if error is None else None, error=error, error_kind=kind,
        trace_file=run.trace_file, seed=run.seed,
        walks=(args.walks or DEFAULT_WALKS) if simulate else None,
        live_steps=DEFAULT_LIVE_STEPS if live_steps is None else live_steps,
        coverage=run.coverage.data() if run.coverage is not None and error is None else None,
        findings=run.findings if error is None else (),
        strict=args is not None and args.strict, proven=run.proven, own_pids=run.own_pids)


def _write_json(path: str, data: dict, stdout) -> None:
    """The JSON report to `path`, or with "-" to `stdout` (the real one)."""
    try:
        if path == "-":
            stdout.write(json.dumps(data, indent=1, default=str) + "\n")
            stdout.flush()
        else:
            json_report.write(path, data)
    except OSError as err:
        print(f"cmc: cannot write the JSON report {path}: {err.strerror or err}",
              file=sys.stderr)


def _write_junit(path: str, run: Run, error: str | None) -> None:
    model = run.model
    name = os.path.basename(model.path) if model is not None else "cmc"
    outcome = run.outcome if error is None else None
    args = run.args
    text = ""
    if outcome is not None and outcome.verdict != "ok":
        live_steps = DEFAULT_LIVE_STEPS if args.live_steps is None else args.live_steps
        text = "\n".join(violation_lines(outcome, live_steps))
    data = junit_report.report(
        model=name, started=run.started, elapsed=time.time() - run.started,
        properties=[(p.kind, p.name) for p in model.properties] if model is not None else [],
        outcome=outcome, failure_text=text, error=error,
        findings=run.findings if error is None else (),
        strict=args is not None and args.strict)
    try:
        junit_report.write(path, data)
    except OSError as err:
        print(f"cmc: cannot write the JUnit report {path}: {err.strerror or err}",
              file=sys.stderr)


def _tell(e: CmcError) -> str:
    """Print the error for the person at the terminal; return its message for the
    JSON report. A usage or model error goes to stderr; a finding about the target or
    an engine limit ends the TLC-style output on stdout."""
    if isinstance(e, UsageError):
        print(f"{e}\n(cmc --help shows the options; docs/cmc.md explains them)",
              file=sys.stderr)
        return str(e)
    if isinstance(e, ModelError):
        text = e.render()
        if isinstance(e, PropertyEvaluationError):
            text += "\n" + "\n".join(render_evaluated_in(e.view, e.next_view))
        print(text, file=sys.stderr)
        return text
    print(f"Error: {e}")
    sys.stdout.flush()
    return str(e)


def _after_interrupt(e: BaseException) -> bool:
    """Whether e was raised while a Ctrl-C or SIGTERM was being handled."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__context__
    return False


def _interrupted():
    sys.stdout.flush()
    print("cmc: interrupted; every node process and temporary directory was removed.",
          file=sys.stderr)
    return EXIT_INTERRUPTED, "interrupted", "interrupted"


def _end(program: bool, mask) -> None:
    """The program keeps Ctrl-C and SIGTERM held until it exits (the kernel drops
    them then): an interrupt after the run cannot turn the exit status into a kill.
    A caller in-process gets its signal mask back."""
    if program:
        hold_interrupts()
    else:
        drop_interrupts(mask)


class _PipeSafe(io.TextIOBase):
    """stdout, until whatever reads it goes away (`cmc ... | head`): from then on what
    cmc prints is dropped, fd 1 is /dev/null, and the run goes on to its verdict and
    exit status, with no traceback (docs/cmc.md, "Output")."""

    def __init__(self, stream):
        self.stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._gone()

    def _gone(self) -> None:
        self.gone = True
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, self.stream.fileno())     # what the stream still holds goes there
        finally:
            os.close(null)

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:
        return self.stream.encoding


def main(argv=None) -> int:
    """The program (argv None: sys.argv), or a run called in-process (argv given)."""
    program = argv is None
    argv = sys.argv[1:] if argv is None else argv
    if program:
        signal.signal(signal.SIGINT, _first_interrupt)
        signal.signal(signal.SIGTERM, _first_interrupt)
        sys.stdout = _PipeSafe(sys.stdout)
    else:
        signal.signal(signal.SIGTERM, _terminate)
    stdout = sys.stdout
    if _json_path(argv) == "-":
        sys.stdout = sys.stderr          # the report goes to stdout, the text to stderr
    try:
        return _main(argv, program, stdout)
    finally:
        sys.stdout = stdout


def _main(argv: list[str], program: bool, stdout) -> int:
    """The run, `stdout` the real one (where `--json -` writes)."""
    tlc = "--tlc-exit-codes" in argv
    run = Run()
    error = kind = None
    mask = None
    try:
        try:
            run.args = parse_args(maelstrom_argv(argv[1:]) if argv[:1] == ["maelstrom"]
                                  else argv)
            outcome = check(run.args, run)
            status = EXIT_OK if outcome.verdict == "ok" else EXIT_VIOLATION
            if run.args.strict and run.findings:
                status = EXIT_VIOLATION
        finally:
            # The run is over, however it ended: from here an interrupt changes
            # nothing (it is dropped at the end), and no scratch directory stays.
            mask = hold_interrupts()
            remove_all()
    except SystemExit as e:          # --help, --version
        _end(program, mask)
        return int(e.code or 0)
    except Exception as e:
        # An interrupt that landed inside a cleanup (a directory being removed, a
        # file being closed) can come out as that cleanup's own error: it is still
        # the interrupt.
        if _after_interrupt(e):
            status, error, kind = _interrupted()
        elif isinstance(e, CmcError):
            error = _tell(e)
            status, kind = e.exit_status, e.kind
        else:
            _end(program, mask)      # a caller in-process gets its signal mask back
            raise
    except KeyboardInterrupt:
        remove_all()                # it may have landed before the finally's (no-op if not)
        status, error, kind = _interrupted()
    json_path = run.args.json if run.args is not None else _json_path(argv)
    data = _report(run, status, error, kind)
    if json_path:
        _write_json(json_path, data, stdout)
    if run.args is not None and run.args.junit:
        _write_junit(run.args.junit, run, error)
    if run.out_dir is not None:
        keep_outputs(run.out_dir, data)
    _end(program, mask)
    if tlc:
        prop = run.outcome.prop if run.outcome is not None and error is None else None
        return tlc_status(status, prop.kind if prop else None, run.load_error)
    return status


if __name__ == "__main__":
    sys.exit(main())
