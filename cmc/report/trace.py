"""Trace files: the behavior of a violation, written so that `cmc --replay` can run
it again (docs/cmc.md describes the format).

A trace is tied to the model it came from: the model file, its params (after -D),
its budgets and network, and the options that change what a behavior means
(--live-steps for an `eventually` trace, --channel-cap). Replaying it against
anything else is refused rather than run on a different system.
"""
from __future__ import annotations

import json

from ..engine.model import PropertyKind
from ..errors import UsageError

TRACE_VERSION = 1


def list_key(key):
    """An action key as JSON (tuples become lists, recursively)."""
    return [list_key(k) if isinstance(k, (tuple, list)) else k for k in key]


def tuple_key(key):
    """The inverse of list_key: JSON lists back to the tuples the kernel uses."""
    return tuple(tuple_key(k) if isinstance(k, list) else k for k in key)


def write_trace(path: str, model, outcome, mode: str, live_steps: int,
                channel_cap: int) -> None:
    data = {
        "cmc_trace": TRACE_VERSION,
        "model": model.path,
        "params": model.params,
        "budgets": model.budgets,
        "network": model.network,
        "live_steps": live_steps,
        "channel_cap": channel_cap,
        "mode": mode,
        "property": {"kind": outcome.prop.kind.value, "name": outcome.prop.name},
        "suffix_from": outcome.suffix_from,
        "loop_to": outcome.loop_to,
        "why": outcome.why,
        "walk_seed": outcome.seed,
        "actions": [{"key": list_key(s.key), "label": s.label} for s in outcome.trace[1:]],
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


def read_trace(path: str) -> dict:
    """A trace file's contents, checked for shape; UsageError if it is not one."""
    def bad(why: str) -> UsageError:
        return UsageError(f"cmc: --replay {path}: {why}")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as err:
        raise bad(f"cannot read the trace: {err.strerror or err}") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise bad(f"not a JSON file: {err}") from None
    if not isinstance(data, dict) or data.get("cmc_trace") != TRACE_VERSION:
        raise bad("not a cmc trace file (version 1): it has no \"cmc_trace\": 1")
    for field, kind in (("model", str), ("params", dict), ("budgets", dict),
                        ("property", dict), ("actions", list)):
        if not isinstance(data.get(field), kind):
            raise bad(f"the trace's \"{field}\" is missing or is not a {kind.__name__}")
    prop = data["property"]
    if not isinstance(prop.get("kind"), str) or not isinstance(prop.get("name"), str):
        raise bad("the trace's \"property\" needs a \"kind\" and a \"name\"")
    if prop["kind"] not in {k.value for k in PropertyKind}:
        raise bad(f"the trace's property kind {prop['kind']!r} is none of cmc's: "
                  + ", ".join(k.value for k in PropertyKind))
    keys = []
    for i, action in enumerate(data["actions"], 2):
        key = action.get("key") if isinstance(action, dict) else None
        if not isinstance(key, list) or not key or not isinstance(key[0], str):
            raise bad(f"the action that leads to state {i} has no valid \"key\"")
        keys.append(tuple_key(key))
    data["keys"] = keys
    return data


def conflicts(trace: dict, model, live_steps: int | None, channel_cap: int | None) -> list[str]:
    """Why the trace cannot be replayed against this model and these options
    (empty: it can). `live_steps`/`channel_cap` are None when not given."""
    out = []
    if trace["model"] != model.path:
        out.append(f"it was written for the model {trace['model']}, not {model.path}")
    for name in sorted(set(trace["params"]) | set(model.params)):
        was, now = trace["params"].get(name), model.params.get(name)
        if was != now:
            hint = f" (add -D {name}={_text(was)})" if name in model.params else ""
            out.append(f"param {name} is {json.dumps(was)} in the trace but "
                       f"{json.dumps(now)} here{hint}")
    for kind in sorted(set(trace["budgets"]) | set(model.budgets)):
        was, now = trace["budgets"].get(kind), model.budgets.get(kind)
        if was != now:
            out.append(f"budget {kind} is {_budget(was)} in the trace but {_budget(now)} in "
                       "the model file")
    if trace.get("network", model.network) != model.network:
        out.append(f"the network is {trace['network']} in the trace but {model.network} in "
                   "the model file")
    kind, name = trace["property"]["kind"], trace["property"]["name"]
    found = [p for p in model.properties if p.name == name]
    if not found:
        out.append(f"the model file has no property {name} any more")
    elif found[0].kind != kind:
        out.append(f"property {name} is {found[0].kind} in the model file, not {kind}")
    if live_steps is not None and PropertyKind(kind) is PropertyKind.EVENTUALLY \
            and trace.get("live_steps") != live_steps:
        out.append(f"the trace was written with --live-steps {trace.get('live_steps')}, "
                   f"not {live_steps}")
    if channel_cap is not None and trace.get("channel_cap", channel_cap) != channel_cap:
        out.append(f"the trace was written with --channel-cap {trace.get('channel_cap')}, "
                   f"not {channel_cap}")
    return out


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _budget(value) -> str:
    return "unlimited" if value is None else str(value)
