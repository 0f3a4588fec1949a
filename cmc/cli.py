"""The command line (SPEC §5): wires the rooms together; the only place that exits.

Exit statuses (SPEC §6): 0 every property holds, 1 a property is violated, 2 usage
or model-file error, 3 target or engine error, 4 this machine cannot run cmc, 130
interrupted. `--tlc-exit-codes` maps them to TLC's (see tlc_status).
"""
from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import time

from . import __version__
from .errors import CmcError, EngineError, ModelError, UnsupportedMachine, UsageError
from .scratch import Scratch

EXIT_OK, EXIT_VIOLATION, EXIT_MODEL = 0, 1, 2
EXIT_INTERRUPTED = 130
DEFAULT_LIVE_STEPS = 100
DEFAULT_CHANNEL_CAP = 64
DEFAULT_WALKS = 100

# TLC's ExitStatus (tlc2/output/EC.java): VIOLATION_SAFETY 12, VIOLATION_LIVENESS 13,
# ERROR_SPEC_PARSE 150, ERROR_CONFIG_PARSE 151, ERROR 255.
TLC_VIOLATION = {"invariant": 12, "quiescent": 12, "action": 13, "eventually": 13,
                 "witness": 255}


def tlc_status(status: int, kind: str | None = None, load_error: bool = False) -> int:
    """cmc's exit status as TLC's. A quiescent property is an invariant of the
    quiescent worlds (12); a witness has no TLC counterpart (255). A model file that
    cannot be loaded is TLC's spec parse error (150); any other exit-2 error (the
    command line, the build, a missing binary, an evaluation error) is 151."""
    if status == EXIT_OK:
        return 0
    if status == EXIT_VIOLATION:
        return TLC_VIOLATION.get(kind, 255)
    if status == EXIT_MODEL:
        return 150 if load_error else 151
    return 255


class _ArgParser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def _count(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


def parse_args(argv):
    p = _ArgParser(prog="cmc", description="Model-check the real binaries of a distributed "
                   "system (docs/cmc.md).")
    p.add_argument("--model-file", metavar="FILE", help="the model file (with --replay: "
                   "the trace's model by default)")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="name=value",
                   help="override a param of the model file")
    p.add_argument("--workers", type=_count(1), default=1, metavar="N",
                   help="breadth-first search with N replay worker processes (same counts "
                   "and counterexample as one)")
    p.add_argument("--fast", action="store_true",
                   help="copy worlds by forking their processes instead of replaying them from "
                   "launch (breadth- and depth-first search; the same results)")
    p.add_argument("--max-depth", type=_count(1), metavar="D",
                   help="do not expand worlds at depth D (the initial world is depth 1); "
                   "with --simulate, the length of a walk (default 100)")
    p.add_argument("--dfs", type=_count(1), metavar="D", help="depth-first, to depth D")
    p.add_argument("--simulate", action="store_true", help="seeded random walks")
    p.add_argument("--seed", type=int, metavar="S", help="with --simulate: walk i uses seed S+i")
    p.add_argument("--walks", type=_count(1), metavar="W",
                   help=f"with --simulate: how many walks (default {DEFAULT_WALKS})")
    p.add_argument("--replay", metavar="TRACE.json", help="run a written trace again")
    p.add_argument("--det", action="store_true",
                   help="take every step twice from a fresh launch and compare")
    p.add_argument("--trace-out", metavar="TRACE.json",
                   help="where to write a violation's trace (default MODEL.trace.json)")
    p.add_argument("--json", metavar="REPORT.json", help="also write the verdict as JSON")
    p.add_argument("--html", metavar="REPORT.html",
                   help="on a violation, also write the counterexample as a self-contained "
                   "page (message-sequence chart, world and node output per step)")
    p.add_argument("--live-steps", type=_count(0), metavar="K",
                   help=f"steps of the fair schedule for eventually (default {DEFAULT_LIVE_STEPS})")
    p.add_argument("--max-states", type=_count(1), metavar="N",
                   help="more distinct states than N is an error (exit 3)")
    p.add_argument("--channel-cap", type=_count(1), metavar="N",
                   help=f"more messages than N in flight on a channel is an error (exit 3; "
                   f"default {DEFAULT_CHANNEL_CAP})")
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


def _validate(args) -> None:
    def usage(message):
        return UsageError(f"cmc: {message}")
    if args.replay is None and args.model_file is None:
        raise usage("the following arguments are required: --model-file")
    if args.dfs is not None and args.simulate:
        raise usage("--dfs and --simulate are two different searches: choose one")
    if args.replay is not None and (args.dfs is not None or args.simulate):
        raise usage("--replay runs a written trace; it does not search (drop --dfs/--simulate)")
    if args.dfs is not None and args.max_depth is not None:
        raise usage("--dfs D is the depth bound of the depth-first search; drop --max-depth")
    if not args.simulate and (args.seed is not None or args.walks is not None):
        raise usage("--seed and --walks go with --simulate")
    if args.watchdog <= 0:
        raise usage(f"argument --watchdog: must be positive, got {args.watchdog:g}")


def _defines(items):
    out = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"cmc: -D expects name=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


def check_machine():
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise UnsupportedMachine(f"cmc needs Linux on x86_64 (this is {platform.system()} "
                                 f"{platform.machine()})")


def run_build(model):
    b = model.build
    if b is None:
        return
    r = subprocess.run(["sh", "-c", b.command], cwd=b.cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        tail = r.stdout.decode(errors="replace").strip()[-2000:]
        raise ModelError(f"build command failed with status {r.returncode}:\n{tail}",
                         b.loc.file, b.loc.line, b.loc.col, b.loc.source_line)


def pin_cpu(index: int | None = None) -> None:
    """Run this process, and the node processes it starts, on one CPU. cmc and a
    node take turns (a notification, its answer): on one CPU the hand-over is a
    local context switch, not a wake-up of another CPU, which costs far more
    (docs/performance.md). Worker `index` takes the index-th allowed CPU (mod
    their number); a lone search the CPU it is running on."""
    try:
        allowed = sorted(os.sched_getaffinity(0))
        if index is not None:
            cpu = allowed[index % len(allowed)]
        else:
            with open("/proc/self/stat") as f:
                cpu = int(f.read().rsplit(")", 1)[1].split()[36])
            if cpu not in allowed:
                cpu = allowed[0]
        os.sched_setaffinity(0, {cpu})
    except (OSError, ValueError, IndexError):
        pass            # not pinned: slower, the same results


def cluster_spec(model, args):
    from .kernel.cluster import ClientSpec, ClusterSpec, NodeSpec
    from .lang import reply_record

    def record(client, node, index, req, raw):
        return reply_record(model.reply, client, node, index, req, raw)
    return ClusterSpec(
        nodes=tuple(NodeSpec(n.name, tuple(n.argv)) for n in model.nodes),
        clients=tuple(ClientSpec(c.name, c.host, c.port, tuple(c.requests)) for c in model.clients),
        budgets=dict(model.budgets),
        reply_record=record,
        params=dict(model.params),
        network=model.network,
        channel_cap=args.channel_cap or DEFAULT_CHANNEL_CAP,
        watchdog_s=args.watchdog,
    )


class PropertyEvaluationError(ModelError):
    """A property could not be evaluated during the search (SPEC §8): the language's
    located error, then the world (and for an action property, the world after)."""

    def __init__(self, err: ModelError, view: dict, next_view: dict | None):
        super().__init__(err.message, err.file, err.line, err.col, err.source_line)
        from .report.tlc import render_world
        lines = ["The world it was evaluated in:"] + render_world(view)
        if next_view is not None:
            lines += ["and the world after the transition:"] + render_world(next_view)
        self.world_lines = lines

    def render(self) -> str:
        return super().render() + "\n" + "\n".join(self.world_lines)


def engine_properties(model):
    from .engine.model import Property
    from .lang import EvaluationError, check_property

    def checker(p):
        def check(view, next_view):
            try:
                return check_property(p, view, next_view)
            except EvaluationError as err:
                raise PropertyEvaluationError(err, view, next_view) from None
        return check
    return [Property(p.kind, p.name, checker(p)) for p in model.properties]


class Run:
    """What a run learned so far, for the JSON report whatever way it ends."""

    def __init__(self):
        self.started = time.time()
        self.args = None
        self.model = None
        self.outcome = None
        self.trace_file = None
        self.load_error = False
        self.mode = "bfs"
        self.seed = None


def _mode(args) -> str:
    if args.replay:
        return "replay"
    if args.dfs is not None:
        return "dfs"
    return "simulate" if args.simulate else "bfs"


def _load(args, run: Run, model_file: str):
    from .lang import check_binaries, load_model
    try:
        model = load_model(model_file, _defines(args.defines))
    except ModelError:
        run.load_error = True
        raise
    run.model = model
    if not args.no_build:
        run_build(model)
    check_binaries(model)
    check_machine()
    return model


def check(args, run: Run) -> int:
    from .adapter import ClusterModel
    from .report.console import make_reporter

    run.mode = _mode(args)
    if args.replay:
        from .report.trace import read_trace
        trace = read_trace(args.replay)
        # The trace says which params it was found with: those not given with -D are
        # taken from it, so that `cmc --replay TRACE.json` alone runs it again; a -D
        # that says otherwise is a conflict, refused below.
        given = {d.split("=", 1)[0].strip() for d in args.defines}
        for name, value in trace.get("params", {}).items():
            if name not in given:
                text = ("true" if value else "false") if isinstance(value, bool) else str(value)
                args.defines.append(f"{name}={text}")
        model = _load(args, run, args.model_file or trace["model"])
        return replay_trace(args, run, model, trace)
    model = _load(args, run, args.model_file)
    live_steps = DEFAULT_LIVE_STEPS if args.live_steps is None else args.live_steps
    props = engine_properties(model)
    if args.simulate:
        run.seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
    reporter = make_reporter()
    scratch = Scratch()
    workroot = scratch.path
    system_model = ClusterModel(cluster_spec(model, args), workroot, many=args.fast)
    try:
        reporter.start(run.seed, (args.walks or DEFAULT_WALKS) if args.simulate else None)
        search = make_search(args, run, system_model, props, reporter, live_steps)
        affinity = os.sched_getaffinity(0)
        if args.workers == 1 and not args.no_pin:
            pin_cpu()
        try:
            outcome = _engine(search.run)
        finally:
            os.sched_setaffinity(0, affinity)
        run.outcome = outcome
        bound = f"--dfs {args.dfs}" if args.dfs is not None else f"--max-depth {args.max_depth}"
        reporter.finish(outcome, live_steps, bound)
        if outcome.verdict == "ok":
            return EXIT_OK
        if outcome.trace:
            from .report.trace import write_trace
            stem = os.path.splitext(os.path.basename(model.path))[0]
            path = args.trace_out or stem + ".trace.json"
            try:
                write_trace(path, model, outcome, run.mode, live_steps,
                            args.channel_cap or DEFAULT_CHANNEL_CAP)
            except OSError as err:
                print(f"cmc: cannot write the trace {path}: {err.strerror or err}",
                      file=sys.stderr)
            else:
                run.trace_file = path
                reporter.say(f"The behavior was written to {path} (run it again with "
                             f"cmc --replay {path}).")
        if args.html:
            steps = _engine(lambda: recorded_steps(model, args, outcome, workroot))
            write_report_page(args.html, model, outcome, steps, reporter)
        return EXIT_VIOLATION
    finally:
        reporter.close()
        system_model.close_all()
        scratch.remove()


def recorded_steps(model, args, outcome, workroot: str):
    """The behavior of `outcome` replayed once more with each node's calls and output
    recorded step by step (the search does not pay for recording)."""
    from .adapter import ClusterModel
    from .engine.replay import replay
    if not outcome.trace:
        return []
    recorder = ClusterModel(cluster_spec(model, args), workroot, recording=True, tag="r")
    try:
        system, steps = replay(recorder, [s.key for s in outcome.trace[1:]],
                               [s.fingerprint for s in outcome.trace], collect=True,
                               observe=lambda s: s.drain())
        system.close()
    finally:
        recorder.close_all()
    return steps


def write_report_page(path: str, model, outcome, steps, reporter) -> None:
    from .report.html import report_from_trace, write_html
    from .report.tlc import KIND_WORDING
    prop = outcome.prop
    message = KIND_WORDING[prop.kind].format(prop.name) if outcome.verdict != "ok" else \
        f"The behavior no longer violates {prop.kind} {prop.name}."
    report = report_from_trace(model=os.path.basename(model.path), prop_kind=prop.kind,
                               prop_name=prop.name, message=message, steps=steps,
                               clients=[c.name for c in model.clients],
                               verdict=outcome.verdict)
    try:
        write_html(path, report)
    except OSError as err:
        print(f"cmc: cannot write the report {path}: {err.strerror or err}", file=sys.stderr)
        return
    reporter.say(f"The counterexample was drawn in {path}.")


def _engine(fn):
    """Run an engine call; its own exceptions become EngineError (exit 3)."""
    from .engine.model import EngineLimit
    from .engine.replay import Nondeterminism
    try:
        return fn()
    except (Nondeterminism, EngineLimit) as e:
        raise EngineError(str(e)) from None


def make_search(args, run: Run, system_model, props, reporter, live_steps: int):
    from .engine.bfs import BreadthFirst
    from .engine.dfs import DepthFirst
    from .engine.simulate import Simulation
    common = dict(max_states=args.max_states, det=args.det, live_steps=live_steps)
    if args.workers > 1 and (args.dfs is not None or args.simulate):
        raise UsageError("cmc: --workers applies to breadth-first search only "
                         "(not with --dfs or --simulate)")
    if args.fast and args.simulate:
        raise UsageError("cmc: --fast applies to breadth-first and depth-first search "
                         "(not to --simulate)")
    if args.workers > 1:
        from .adapter import ClusterModel
        from .engine.parallel import FastParallelBreadthFirst, ParallelBreadthFirst
        spec, root = system_model.spec, system_model.workroot

        def worker_model(index: int):
            if not args.no_pin:
                pin_cpu(index)
            return ClusterModel(spec, root, many=args.fast, tag=f"k{index}")
        search = FastParallelBreadthFirst if args.fast else ParallelBreadthFirst
        return search(system_model, props, reporter, workers=args.workers,
                                    worker_model=worker_model, max_depth=args.max_depth,
                                    fast=args.fast, **common)
    if args.dfs is not None:
        return DepthFirst(system_model, props, reporter, depth=args.dfs, fast=args.fast,
                          **common)
    if args.simulate:
        return Simulation(system_model, props, reporter, seed=run.seed,
                          walks=args.walks or DEFAULT_WALKS, max_depth=args.max_depth, **common)
    return BreadthFirst(system_model, props, reporter, max_depth=args.max_depth,
                        fast=args.fast, **common)


def replay_trace(args, run: Run, model, trace: dict) -> int:
    """--replay: run the trace's actions from a fresh launch, show every state with
    what each node did, and say whether the trace's property is still violated."""
    from .adapter import ClusterModel
    from .engine.model import Outcome, Stats
    from .engine.replay import replay, violated_at_end
    from .report.tlc import TlcReporter
    from .report.trace import conflicts

    refused = conflicts(trace, model, args.live_steps, args.channel_cap)
    if refused:
        raise UsageError(f"cmc: --replay {args.replay}: refused, the trace does not belong "
                         "to this model: " + "; ".join(refused))
    channel_cap = trace.get("channel_cap") or DEFAULT_CHANNEL_CAP
    live_steps = trace.get("live_steps")
    args.channel_cap = args.channel_cap or channel_cap
    name = trace["property"]["name"]
    prop = next(p for p in engine_properties(model) if p.name == name)
    keys = trace["keys"]
    reporter = TlcReporter()
    scratch = Scratch()
    system_model = ClusterModel(cluster_spec(model, args), scratch.path, recording=True)
    try:
        reporter.start(replay=True)
        reporter.say(f"Replaying {args.replay}: {len(keys) + 1} states, from a behavior that "
                     f"violated {prop.kind} {prop.name}.")

        def run_it():
            system, steps = replay(system_model, keys, None, collect=True,
                                   observe=lambda s: s.drain())
            try:
                actions = system.actions()
            finally:
                system.close()
            violated = violated_at_end(system_model, prop, keys, steps, actions,
                                       trace.get("suffix_from"))
            return steps, violated
        steps, violated = _engine(run_it)
        stats = Stats(generated=len(steps), distinct=len({s.fingerprint for s in steps}),
                      depth=len(steps))
        outcome = Outcome("violated" if violated else "ok", stats, prop, steps,
                          suffix_from=trace.get("suffix_from"), loop_to=trace.get("loop_to"),
                          why=trace.get("why"))
        run.outcome = outcome
        reporter.replayed(outcome, live_steps)
        if args.html:
            write_report_page(args.html, model, outcome, steps, reporter)
        return EXIT_VIOLATION if violated else EXIT_OK
    finally:
        system_model.close_all()
        scratch.remove()


def _terminate(signum, frame):
    raise KeyboardInterrupt


def _json_path(argv) -> str | None:
    """--json's value, found without argparse: a usage error is reported there too."""
    for i, arg in enumerate(argv):
        if arg == "--json" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--json="):
            return arg.split("=", 1)[1]
    return None


def _write_json(path: str, run: Run, status: int, error: str | None,
                kind: str | None) -> None:
    from .report import json as json_report
    args = run.args
    simulate = args is not None and args.simulate
    live_steps = args.live_steps if args is not None else None
    data = json_report.report(
        mode=run.mode, exit_status=status, elapsed=time.time() - run.started, model=run.model,
        outcome=run.outcome if error is None else None, error=error, error_kind=kind,
        trace_file=run.trace_file, seed=run.seed,
        walks=(args.walks or DEFAULT_WALKS) if simulate else None,
        live_steps=DEFAULT_LIVE_STEPS if live_steps is None else live_steps)
    try:
        json_report.write(path, data)
    except OSError as err:
        print(f"cmc: cannot write the JSON report {path}: {err.strerror or err}",
              file=sys.stderr)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, _terminate)
    tlc = "--tlc-exit-codes" in argv
    run = Run()
    error = kind = None
    try:
        run.args = parse_args(argv)
        status = check(run.args, run)
    except SystemExit as e:          # --help, --version
        return int(e.code or 0)
    except KeyboardInterrupt:
        sys.stdout.flush()
        print("cmc: interrupted; every node process and temporary directory was removed.",
              file=sys.stderr)
        status, error, kind = EXIT_INTERRUPTED, "interrupted", "interrupted"
    except UsageError as e:
        print(f"{e}\n(cmc --help shows the options; docs/cmc.md explains them)",
              file=sys.stderr)
        status, error, kind = EXIT_MODEL, str(e), "usage"
    except ModelError as e:
        print(e.render(), file=sys.stderr)
        status, error, kind = EXIT_MODEL, e.render(), "model"
    except CmcError as e:          # a finding about the target, or an engine limit
        print(f"Error: {e}")
        sys.stdout.flush()
        status, error = e.exit_status, str(e)
        kind = {"TargetError": "target", "UnsupportedMachine": "machine"}.get(
            type(e).__name__, "engine")
    json_path = run.args.json if run.args is not None else _json_path(argv)
    if json_path:
        _write_json(json_path, run, status, error, kind)
    if tlc:
        prop = run.outcome.prop if run.outcome is not None and error is None else None
        return tlc_status(status, prop.kind if prop else None, run.load_error)
    return status


if __name__ == "__main__":
    sys.exit(main())
