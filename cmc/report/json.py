"""`--json REPORT.json`: the verdict for machines (schema in docs/cmc.md).

Written for every run that got as far as reading its arguments, including runs
that end in an error, so that a CI job can always read one file.
"""
from __future__ import annotations

import json
import os
import tempfile

from .. import __version__
from .tlc import collision_probability

SCHEMA_VERSION = 1


def report(*, mode: str, exit_status: int, elapsed: float, model=None, outcome=None,
           error: str | None = None, error_kind: str | None = None,
           trace_file: str | None = None, seed: int | None = None,
           walks: int | None = None, live_steps: int | None = None,
           coverage: dict | None = None, findings: list = (), strict: bool = False,
           proven=None, own_pids: list = ()) -> dict:
    """The report as plain data. `outcome` is the engine's Outcome (None when the
    run ended in an error before a verdict: then `error` is its message and
    `error_kind` its kind, the error's `kind` or "interrupted"). `coverage` and
    `findings` are cmc/coverage.py's; under `strict` a finding makes an "ok" search's
    verdict "vacuous". `proven` (engine.model.Proven) says how far a breadth-first
    search that stopped part way got. `own_pids`: the nodes given a PID namespace
    because their start made a process group of its own."""
    data = {
        "cmc_report": SCHEMA_VERSION,
        "cmc_version": __version__,
        "model": getattr(model, "path", None),
        "params": dict(getattr(model, "params", {}) or {}),
        "mode": mode,
        "verdict": "error",
        "exit_status": exit_status,
        "message": error,
        "property": None,
        "error": None,
        "counts": None,
        "depth": None,
        "bounded": False,
        "collision_probability": None,
        "simulation": None,
        "trace": [],
        "history": None,
        "fair_suffix_from": None,
        "back_to_state": None,
        "fair_ending": None,
        "live_steps": live_steps,
        "trace_file": trace_file,
        "elapsed_seconds": round(elapsed, 3),
        "workers": None,
        "coverage": coverage,
        "stopped": proven.data() if proven is not None else None,
        "findings": [{"kind": f.kind, "message": f.message} for f in findings],
        "own_pids": list(own_pids),
    }
    if seed is not None:
        data["simulation"] = {"seed": seed, "walks": walks, "failing_walk": None,
                              "failing_walk_seed": None}
    if outcome is None:
        data["error"] = {"kind": error_kind, "message": error}
        return data
    st = outcome.stats
    data["verdict"] = outcome.verdict
    data["counts"] = {"generated": st.generated, "distinct": st.distinct,
                      "left_on_queue": st.queue}
    data["depth"] = st.depth
    data["copies"] = st.copies
    data["replayed"] = dict(sorted(st.replayed.items()))
    data["relaunched"] = st.relaunched
    if st.reduced is not None:
        data["por"] = {"reduced": st.reduced, "skipped": st.slept}
    data["workers"] = st.workers
    data["bounded"] = outcome.bounded
    if outcome.verdict == "ok":
        data["message"] = "No error has been found."
        data["collision_probability"] = collision_probability(st)
        if strict and findings:
            data["verdict"] = "vacuous"
            data["message"] = findings[0].message
    else:
        prop = outcome.prop
        data["property"] = {"kind": prop.kind.value, "name": prop.name}
        data["message"] = prop.kind.violated(prop.name)
        data["trace"] = [{"state": i, "action": step.label, "key": _jsonable(step.key),
                          "world": _world(step.view)}
                         for i, step in enumerate(outcome.trace, 1)]
        data["fair_suffix_from"] = outcome.suffix_from
        data["back_to_state"] = outcome.loop_to
        data["fair_ending"] = outcome.why
        if prop.detail is not None and outcome.trace:
            data["history"] = prop.detail(outcome.trace[-1].view)
    if outcome.walk_seed is not None or outcome.walk_from is not None:
        data["walks"] = {"seed": outcome.walk_seed,
                         "walks_done": st.walks, "failing_walk": outcome.walk,
                         "failing_walk_seed": outcome.seed, "from_depth": outcome.walk_from,
                         "walk_states": outcome.shrunk_from or len(outcome.trace) or None,
                         "shrink_stopped": outcome.shrink_stopped}
    if data["simulation"] is not None:
        data["simulation"]["swarm"] = outcome.swarm or None
        data["simulation"]["walks_done"] = st.walks
        data["simulation"]["failing_walk"] = outcome.walk
        data["simulation"]["failing_walk_seed"] = outcome.seed
        data["simulation"]["walk_states"] = outcome.shrunk_from or len(outcome.trace) or None
    return data


def _world(view: dict) -> dict:
    names = view.get("node_names") or []
    out = {"nodes": list(names)}
    for part in ("node", "volatile", "durable", "alive", "crashes", "network", "replies"):
        out[part] = view.get(part)
    if "clock_ns" in view:                  # time virtual
        out["clock_ns"] = view["clock_ns"]
    return out


def _jsonable(key):
    if key is None:
        return None
    return [_jsonable(k) if isinstance(k, (tuple, list)) else k for k in key]


def write(path: str, data: dict) -> None:
    """Write atomically: a reader never sees half a report."""
    text = json.dumps(data, indent=1, default=str) + "\n"
    write_atomically(path, text.encode("utf-8"), ".cmc-report-")


def write_atomically(path: str, data: bytes, prefix: str) -> None:
    """`data` into `path` by a temporary file beside it renamed over it."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
