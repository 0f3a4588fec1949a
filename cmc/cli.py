"""The command line (SPEC §5): wires the rooms together; the only place that exits."""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile

from . import __version__
from .errors import CmcError, EngineError, ModelError, UnsupportedMachine, UsageError

EXIT_OK, EXIT_VIOLATION, EXIT_MODEL, EXIT_TARGET, EXIT_MACHINE = 0, 1, 2, 3, 4
TLC_EXIT = {EXIT_OK: 0, EXIT_VIOLATION: 12, EXIT_MODEL: 150, EXIT_TARGET: 255, EXIT_MACHINE: 255}


class _ArgParser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def parse_args(argv):
    p = _ArgParser(prog="cmc", description="Model-check the real binaries of a distributed system.")
    p.add_argument("--model-file", required=True, metavar="FILE")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="name=value",
                   help="override a param of the model file")
    p.add_argument("--max-depth", type=int, metavar="D")
    p.add_argument("--max-states", type=int, metavar="N")
    p.add_argument("--trace-out", metavar="TRACE.json")
    p.add_argument("--watchdog", type=float, default=10.0, metavar="SECONDS")
    p.add_argument("--channel-cap", type=int, default=64, metavar="N")
    p.add_argument("--no-build", action="store_true", help="skip the model's build command")
    p.add_argument("--tlc-exit-codes", action="store_true")
    p.add_argument("--version", action="version", version=f"cmc {__version__}")
    return p.parse_args(argv)


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
        channel_cap=args.channel_cap,
        watchdog_s=args.watchdog,
    )


def engine_properties(model):
    from .engine.model import Property
    from .lang import check_property

    out = []
    for p in model.properties:
        if p.kind == "eventually":
            raise ModelError("eventually properties are not supported yet (issue 4)",
                             p.loc.file, p.loc.line, p.loc.col, p.loc.source_line)
        out.append(Property(p.kind, p.name,
                            lambda view, nxt, _p=p: check_property(_p, view, nxt)))
    return out


def write_trace(path, model, outcome):
    data = {
        "cmc_trace": 1,
        "model": model.path,
        "params": model.params,
        "budgets": model.budgets,
        "property": {"kind": outcome.prop.kind, "name": outcome.prop.name},
        "actions": [{"key": list_key(s.key), "label": s.label} for s in outcome.trace[1:]],
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


def list_key(key):
    return [list_key(k) if isinstance(k, tuple) else k for k in key]


def check(args) -> int:
    from .adapter import ClusterModel
    from .engine.bfs import BreadthFirst, EngineLimit
    from .engine.replay import Nondeterminism
    from .lang import check_binaries, load_model
    from .report.tlc import TlcReporter

    model = load_model(args.model_file, _defines(args.defines))
    if not args.no_build:
        run_build(model)
    check_binaries(model)
    check_machine()
    reporter = TlcReporter()
    workroot = tempfile.mkdtemp(prefix="cmc-")
    system_model = ClusterModel(cluster_spec(model, args), workroot)
    try:
        reporter.start()
        search = BreadthFirst(system_model, engine_properties(model), reporter,
                              max_depth=args.max_depth, max_states=args.max_states)
        try:
            outcome = search.run()
        except (Nondeterminism, EngineLimit) as e:
            raise EngineError(str(e)) from None
        reporter.finish(outcome)
        if outcome.verdict == "ok":
            return EXIT_OK
        if outcome.trace:
            path = args.trace_out or os.path.splitext(os.path.basename(model.path))[0] + ".trace.json"
            write_trace(path, model, outcome)
            reporter.say(f"The behavior was written to {path} (run it again with cmc --replay).")
        return EXIT_VIOLATION
    finally:
        system_model.close_all()
        shutil.rmtree(workroot, ignore_errors=True)


def _terminate(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, _terminate)
    tlc = "--tlc-exit-codes" in argv
    try:
        status = check(parse_args(argv))
    except SystemExit as e:          # --help, --version
        return int(e.code or 0)
    except KeyboardInterrupt:
        sys.stdout.flush()
        print("cmc: interrupted; every node process and temporary directory was removed.",
              file=sys.stderr)
        return 130
    except ModelError as e:
        print(e.render(), file=sys.stderr)
        status = EXIT_MODEL
    except CmcError as e:          # a finding about the target, or an engine limit
        print(f"Error: {e}")
        sys.stdout.flush()
    except Exception:              # a bug in cmc itself: say so, with the traceback
        import traceback
        sys.stdout.flush()
        print("cmc: internal error (this is a bug in cmc; please report it):", file=sys.stderr)
        traceback.print_exc()
        status = EXIT_TARGET
        status = e.exit_status
    return TLC_EXIT[status] if tlc else status


if __name__ == "__main__":
    sys.exit(main())
