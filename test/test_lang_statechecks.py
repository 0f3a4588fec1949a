"""StateChecks: a state property is evaluated once per value of the world names it
reads, agrees with check_property, raises every time, and forgets at its limit; which
world names an expression reads.

Fast: no process is started. Model files are written to tmp_path.
"""
from __future__ import annotations

import sys

import pytest

from cmc.lang import EvaluationError, check_property
from langutil import WORLD, load

# --- StateChecks: a state property evaluated once per value of what it reads ----------

def _counting(monkeypatch):
    module = sys.modules["cmc.lang.evaluate"]   # cmc.lang.evaluate is also a function
    calls = []
    real = module.check_property

    def counted(prop, world, next_world=None):
        calls.append(prop.name)
        return real(prop, world, next_world)
    monkeypatch.setattr(module, "check_property", counted)
    return calls


def _digest(data: bytes) -> bytes:
    import hashlib
    return hashlib.blake2b(data, digest_size=16).digest()


def test_state_checks_agree_with_check_property_and_skip_repeats(tmp_path, monkeypatch):
    from cmc.lang import StateChecks
    model = load(tmp_path, 'param k = 2\nnode a = "/x"\nnode b = "/y"\n'
                 "invariant logs: all i in [0, 1]: len(node[i].log) <= k\n"
                 "invariant alive_one: alive[0] or alive[1]\n"
                 "action grows: len(durable'[0].log) >= len(durable[0].log)\n")
    logs, alive_one, grows = model.properties
    checks, calls = StateChecks(_digest), _counting(monkeypatch)
    worlds = []
    for n in range(4):
        for up in ([True, False], [False, False]):
            for msg in ("m1", "m2"):             # not read by any property
                worlds.append(dict(WORLD, node=[{"log": list(range(n))}, {"log": []}],
                                   durable=[{"log": list(range(n))}, {"log": []}],
                                   alive=up, network=[{"data": msg}], params={"k": 2}))
    for world in worlds:
        for prop in (logs, alive_one):
            assert checks.check(prop, world) is check_property(prop, world)
    # 16 worlds: 4 values of node (with 1 of params) for logs, 2 of alive for alive_one
    assert calls.count("logs") == 4 and calls.count("alive_one") == 2
    # a param is part of what is read: another value is another evaluation
    assert checks.check(logs, dict(worlds[-1], params={"k": 5})) is True
    assert checks.check(logs, worlds[-1]) is False
    # an action property (and any check with a world after) is evaluated every time
    calls.clear()
    for _ in range(3):
        assert checks.check(grows, worlds[0], worlds[-1]) is True
        assert checks.check(logs, worlds[0], worlds[0]) is True
    assert calls == ["grows", "logs"] * 3


def test_state_checks_raise_every_time_and_forget_at_the_limit(tmp_path, monkeypatch):
    from cmc.lang import StateChecks
    model = load(tmp_path, 'node a = "/x"\ninvariant p: node[0].log < 1\n'
                 "invariant q: len(node[0].log) >= 0\n")
    p, q = model.properties
    checks = StateChecks(_digest)
    for _ in range(2):
        with pytest.raises(EvaluationError, match="in property p: cannot order list"):
            checks.check(p, dict(WORLD))
    monkeypatch.setattr(StateChecks, "LIMIT", 3)
    calls = _counting(monkeypatch)
    for n in range(5):
        assert checks.check(q, dict(WORLD, node=[{"log": [0] * n}])) is True
    assert checks.check(q, dict(WORLD, node=[{"log": [0] * 4}])) is True   # kept
    assert checks.check(q, dict(WORLD, node=[{"log": []}])) is True        # forgotten
    assert calls == ["q"] * 6


def test_world_names_read(tmp_path):
    from cmc.lang.evaluate import world_names_read
    model = load(tmp_path, 'param k = 1\nnode a = "/x"\n'
                 "invariant a1: len(replies) < k\ninvariant a2: network == [] and alive[0]\n"
                 "invariant a3: true\naction a4: alive'[0] == alive[0]\n")
    reads = [world_names_read(p.expr) for p in model.properties]
    assert reads == [("params", "replies"), ("alive", "network"), (), None]
