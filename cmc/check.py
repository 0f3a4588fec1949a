"""Running a check: load the model, build it, search (or replay a trace), report.

This is where the rooms are wired together for one run: the language loads the model,
the adapter turns it into a cluster spec and the engine's properties, the engine
searches, the reporters render. It raises the errors of cmc/errors.py and never exits:
cli.py turns what `check` returns (an Outcome) or raises into an exit status.
experiments/bench.py makes its searches with `make_search`, as `check` does.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

from . import __version__
from .adapter import ClusterModel, cluster_spec, engine_properties
from .coverage import Coverage
from .engine.bfs import BreadthFirst
from .engine.dfs import DepthFirst
from .engine.model import EngineLimit, Outcome, Stats
from .engine.pool import WorkerPool
from .engine.por import PorCheckFailed, SleepSets
from .engine.replay import Nondeterminism, replay, violated_at_end
from .engine.search import DEFAULT_LIVE_STEPS, Search
from .engine.simulate import Walks
from .engine.worlds import Copying, InProcess, Replaying
from .errors import EngineError, ModelError, UnsupportedMachine, UsageError
from .lang import check_binaries, load_model
from .lang.transactions import LEVELS                                # cmc maelstrom
from .lang.workloads import (BUDGET_FLAGS, DEFAULT_LEVEL, DEFAULT_OPS, NOT_YET, TXN,
                             WORKLOADS, check_horizon, has_phases, model_text)
from .report.console import make_reporter
from .report.html import report_from_trace, write_html
from .report.tlc import TlcReporter
from .report.trace import conflicts, read_trace, write_trace
from .interrupts import interrupts_held
from .resources import Bound
from .scratch import Scratch
from .machines import pin_cpu

DEFAULT_CHANNEL_CAP = 64
DEFAULT_WALKS = 100
# `cmc maelstrom`'s workloads, for maelstrom_cmd.py (which may not import the language)
FOR_MAELSTROM = (BUDGET_FLAGS, DEFAULT_LEVEL, DEFAULT_OPS, LEVELS, NOT_YET, TXN, WORKLOADS,
                 check_horizon, has_phases, model_text)


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
        self.walk_seed = None         # --seconds: the seed of the walks after the search
        self.out_dir = None           # --out: where this run's outputs are kept
        self.proven = None            # a breadth-first search stopped part way: Proven
        self.coverage = None          # the search's Coverage (cmc/coverage.py)
        self.findings = []            # what never happened, when the search ended "ok"
        self.own_pids = []            # nodes given a PID namespace for their process groups


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


def spec_for(model, args):
    """The kernel's cluster spec of `model` with the command line's channel cap and watchdog."""
    return cluster_spec(model, args.channel_cap or DEFAULT_CHANNEL_CAP, args.watchdog,
                        getattr(args, "trace_ticks", False))


def _mode(args) -> str:
    if args.replay:
        return "replay"
    if args.dfs is not None:
        return "dfs"
    return "simulate" if args.simulate else "bfs"


def _defines(items):
    """-D's name=value items as the params they override. Parsed here, when the model
    is loaded, and not with the other options: with --replay, the trace's params are
    added to them first (see check)."""
    out = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"cmc: -D expects name=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


def _load(args, run: Run, model_file: str):
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


def check(args, run: Run) -> Outcome:
    """The run the command line asks for: a search, or with --replay a trace run
    again. Its Outcome is also kept in `run` (verdict "ok" or "violated")."""
    run.mode = _mode(args)
    if args.replay:
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
    if args.out:
        run.out_dir = new_out_dir(args.out, model, args.out_test)
    live_steps = DEFAULT_LIVE_STEPS if args.live_steps is None else args.live_steps
    props = engine_properties(model)
    if args.simulate:
        run.seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
    elif getattr(args, "seconds", None) is not None and args.dfs is None:
        # the seed of the walks that take the time a breadth-first search leaves
        run.walk_seed = args.seed if args.seed is not None else \
            int.from_bytes(os.urandom(4), "big")
    reporter = make_reporter()
    scratch = Scratch(parent=args.scratch)
    workroot = scratch.path
    memory_bound = Bound(args.max_memory, workroot)
    system_model = ClusterModel(spec_for(model, args), workroot, many=args.fast)
    try:
        memory_bound.start()
        reporter.start(run.seed, (args.walks or DEFAULT_WALKS) if args.simulate else None,
                       banner=banner(args, model))
        run.coverage = Coverage(model)
        search = make_search(args, run, system_model, props, reporter, live_steps,
                             observer=run.coverage)
        affinity = os.sched_getaffinity(0)
        if args.workers == 1 and not args.no_pin:
            pin_cpu()
        try:
            outcome = _engine(lambda: searched(search, memory_bound))
        except (EngineError, KeyboardInterrupt) as e:
            # stopped part way (a cap, the memory bound, Ctrl-C): what it had proven
            if search.per_depth and args.dfs is None and not args.simulate:
                run.proven = search.proven("interrupted" if isinstance(e, KeyboardInterrupt)
                                           else "at the error above")
                if isinstance(e, EngineError):
                    e.args = ("\n".join([str(e)] + run.proven.lines()),)
                else:
                    for line in run.proven.lines():
                        reporter.say(line)
            raise
        finally:
            os.sched_setaffinity(0, affinity)
        run.outcome = outcome
        run.proven = run.proven or outcome.stopped
        bound = f"--dfs {args.dfs}" if args.dfs is not None else f"--max-depth {args.max_depth}"
        notes = [OWN_PIDS_NOTE.format(name) for name in own_pid_names(system_model.spec)]
        if outcome.verdict == "ok":
            run.findings = run.coverage.findings()
            notes += run.coverage.lines(whole=args.coverage) + [
                ("Error: " if args.strict else "Warning: ") + f.message + "."
                for f in run.findings]
        reporter.finish(outcome, live_steps, bound, notes)
        merges = getattr(search, "merges", None)
        if merges is not None:
            reporter.say(merges.summary())
        if outcome.stats.reduced is False:
            reporter.say("--por: the model's action or eventually properties read every "
                         "transition, so none was skipped (the search is the full one)")
        if outcome.verdict == "ok":
            if run.out_dir is not None:
                keep_node_output(run.out_dir, _engine(
                    lambda: launch_output(system_model.spec, workroot)))
            return outcome
        if outcome.trace:
            stem = os.path.splitext(os.path.basename(model.path))[0]
            path = args.trace_out or os.path.join(run.out_dir or "", stem + ".trace.json")
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
        html = args.html or (os.path.join(run.out_dir, "report.html") if run.out_dir else None)
        if html:
            steps = _engine(lambda: recorded_steps(system_model.spec, outcome, workroot))
            write_report_page(html, model, outcome, steps, reporter)
            if run.out_dir is not None:
                keep_node_output(run.out_dir, [s.output for s in steps])
        return outcome
    finally:
        memory_bound.stop()
        run.own_pids = own_pid_names(system_model.spec)   # for --json, however it ended
        _end_run(system_model, scratch, reporter.close)


OWN_PIDS_NOTE = ("Node {} made a process group of its own at its start: each launch of it "
                 "numbered its processes from 1 in a PID namespace of its own (as `machine "
                 "pids private`).")


def own_pid_names(spec) -> list[str]:
    """The nodes whose start made a process group of their own, so that each launch of
    them had a PID namespace (adapter.ClusterModel.fresh)."""
    return [n.name for i, n in enumerate(spec.nodes) if i in spec.own_pids]


def _end_run(system_model, scratch: Scratch, first=None) -> None:
    """Close the run's worlds and remove its scratch directory, whatever happens
    meanwhile (an error closing, a second Ctrl-C): `first` (the reporter's close)
    before."""
    with interrupts_held():
        try:
            if first is not None:
                first()
            system_model.close_all()
        finally:
            scratch.remove()


def new_out_dir(parent: str, model, test: str | None = None) -> str:
    """--out: a new directory for this run, PARENT/TEST/TIME, TEST the model's name
    unless given (cmc maelstrom: the workload), as in Maelstrom's store/: a folder per
    test, one per run, newest as `latest`."""
    stem = test or os.path.splitext(os.path.basename(model.path))[0]
    base = os.path.join(parent, stem)
    os.makedirs(base, exist_ok=True)
    name = time.strftime("%Y%m%dT%H%M%S")
    for n in range(1, 1000):
        path = os.path.join(base, name if n == 1 else f"{name}-{n}")
        try:
            os.mkdir(path)
            return path
        except FileExistsError:
            continue
    raise UsageError(f"cmc: --out: cannot make a new directory under {base}")


def keep_outputs(out_dir: str, report: dict) -> None:
    """--out, at the end of the run however it ended: the JSON report in the run's
    directory, and `latest` pointing at it."""
    try:
        with open(os.path.join(out_dir, "report.json"), "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1, default=str)
            f.write("\n")
        latest = os.path.join(os.path.dirname(out_dir), "latest")
        tmp = latest + ".new"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(os.path.basename(out_dir), tmp)
        os.replace(tmp, latest)
    except OSError as err:
        print(f"cmc: cannot keep the run's outputs in {out_dir}: {err.strerror or err}",
              file=sys.stderr)


def keep_node_output(out_dir: str, outputs: list) -> None:
    """--out: each node's stdout and stderr over the behavior shown (the counterexample,
    or a search's initial world), as nodes/NAME.stdout and .stderr."""
    folder = os.path.join(out_dir, "nodes")
    os.makedirs(folder, exist_ok=True)
    texts: dict[tuple[str, str], str] = {}
    for output in outputs:
        for node, parts in (output or {}).items():
            for stream in ("stdout", "stderr"):
                texts[node, stream] = texts.get((node, stream), "") + parts.get(stream, "")
    for (node, stream), text in texts.items():
        with open(os.path.join(folder, f"{node}.{stream}"), "w", encoding="utf-8") as f:
            f.write(text)


def launch_output(spec, workroot: str) -> list:
    """What each node printed at launch (--out, when the search found no violation),
    the search's ClusterSpec `spec` (with the PID namespaces its launch chose)."""
    recorder = ClusterModel(spec, workroot, recording=True, tag="r")
    try:
        system = recorder.fresh()
        output = system.drain()
        system.close()
    finally:
        recorder.close_all()
    return [output]


def recorded_steps(spec, outcome, workroot: str):
    """The behavior of `outcome` replayed once more with each node's calls and output
    recorded step by step (the search does not pay for recording), with the search's
    ClusterSpec."""
    if not outcome.trace:
        return []
    recorder = ClusterModel(spec, workroot, recording=True, tag="r")
    # a recording cannot be copied, so a fold that meets a visible FIRE makes the world
    # again from launch; the behavior's own worlds are where the search's folds stopped
    recorder.visible_next.update(s.fingerprint for s in outcome.trace)
    try:
        system, steps = replay(recorder, [s.key for s in outcome.trace[1:]],
                               [s.fingerprint for s in outcome.trace], collect=True,
                               observe=lambda s: s.drain())
        system.close()
    finally:
        recorder.close_all()
    return steps


def write_report_page(path: str, model, outcome, steps, reporter) -> None:
    prop = outcome.prop
    message = prop.kind.violated(prop.name) if outcome.verdict != "ok" else \
        f"The behavior no longer violates {prop.kind} {prop.name}."
    maelstrom = model.maelstrom
    report = report_from_trace(model=os.path.basename(model.path), prop_kind=prop.kind.value,
                               prop_name=prop.name, message=message, steps=steps,
                               clients=[c.name for c in model.clients]
                               + [c.name for c in (maelstrom.clients if maelstrom else ())],
                               services=list(maelstrom.services) if maelstrom else [],
                               verdict=outcome.verdict,
                               history=prop.detail(steps[-1].view)
                               if prop.detail is not None and steps else None)
    try:
        write_html(path, report)
    except OSError as err:
        print(f"cmc: cannot write the report {path}: {err.strerror or err}", file=sys.stderr)
        return
    reporter.say(f"The counterexample was drawn in {path}.")


def searched(search, memory_bound: Bound) -> Outcome:
    """search.run(), keeping more live worlds to copy from while the memory bound has
    room for them (docs/design.md, "How many worlds are kept")."""
    Search.more_room = memory_bound.room_for_more
    try:
        return search.run()
    finally:
        Search.more_room = Search.no_more_room


def _engine(fn):
    """Run an engine call; its own exceptions become EngineError (exit 3)."""
    try:
        return fn()
    except (Nondeterminism, EngineLimit, PorCheckFailed) as e:
        raise EngineError(str(e)) from None


def banner(args, model) -> str:
    """The opening line, as TLC's: what is checked. Not how (workers, copying): the
    output is the same every way a search is run."""
    order = (f"depth-first search to depth {args.dfs}" if args.dfs is not None else
             "random simulation" if args.simulate else "breadth-first search")
    nodes = ", ".join(model.node_names)
    clients = [c.name for c in model.clients]
    if model.maelstrom is not None:
        clients += [c.name for c in model.maelstrom.clients]
    budgets = ", ".join(f"{k} {v}" for k, v in sorted(model.budgets.items())
                        if v) or "none"
    parts = [f"nodes {nodes}"] + ([f"clients {', '.join(clients)}"] if clients else []) + [
        f"budgets {budgets}", f"time {model.time.mode}", f"network {model.network}",
        f"disk {model.disk}"]
    return f"cmc {__version__}: {order} of {args.model_file}: " + "; ".join(parts) + "."


def make_search(args, run: Run, system_model, props, reporter, live_steps: int,
                observer=None) -> Search:
    """The search the command line asks for, made of its parts (cmc/engine/search.py):
    an order (breadth-first, --dfs D, --simulate), a world source (copying, or
    --no-fast replaying), an executor (this process, --workers N processes, --ray
    actors) and a reduction (--por's sleep sets, or none)."""
    if (args.workers > 1 or args.ray) and (args.dfs is not None or args.simulate):
        raise UsageError("cmc: --workers applies to breadth-first search only "
                         "(not with --dfs or --simulate)")
    reduction = None
    if args.dfs is not None:
        order = DepthFirst(args.dfs)
    elif args.simulate:
        order = Walks(run.seed, args.walks or DEFAULT_WALKS, swarm=getattr(args, "swarm", False))
    else:
        order = BreadthFirst(check_merges=args.check_merges)
        reduction = SleepSets(check_por=args.check_por) if args.por else None
    worlds = Copying() if args.fast else Replaying()
    executor = _pool(args, system_model) if args.workers > 1 or args.ray else InProcess()
    search = Search(system_model, props, reporter, order, worlds, executor, reduction,
                    max_depth=args.max_depth, max_states=args.max_states, det=args.det,
                    live_steps=live_steps, observer=observer,
                    seconds=getattr(args, "seconds", None), walk_seed=run.walk_seed)
    return search


def _pool(args, system_model) -> WorkerPool:
    """--workers N's processes, or with --ray the actors, each with its own model."""
    spec, root = system_model.spec, system_model.workroot
    pin = not args.no_pin and not args.ray

    def worker_model(index: int):
        if pin:
            pin_cpu(index)
        return ClusterModel(spec, root, many=args.fast, tag=f"k{index}")
    if not args.ray:
        return WorkerPool(args.workers, worker_model)
    from .engine.rayworkers import RayPool
    from .machines import MachineCheck
    return RayPool(args.workers, worker_model, args.ray, MachineCheck(
        [(n.name, n.argv) for n in spec.nodes], root, pin=not args.no_pin))


def replay_trace(args, run: Run, model, trace: dict) -> Outcome:
    """--replay: run the trace's actions from a fresh launch, show every state with
    what each node did, and say whether the trace's property is still violated
    (the Outcome's verdict: "violated", or "ok")."""
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
    scratch = Scratch(parent=args.scratch)
    system_model = ClusterModel(spec_for(model, args), scratch.path, recording=True)
    memory_bound = Bound(args.max_memory, scratch.path)
    try:
        memory_bound.start()
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
        return outcome
    finally:
        memory_bound.stop()
        _end_run(system_model, scratch)
