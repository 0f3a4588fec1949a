"""The example model file of docs/model-file.md (the durlog model at the top of the
page), loaded field by field, its properties evaluated, pickled for the workers, and
its param overridden by -D.

Fast: no process is started. Model files are written to tmp_path.
"""
from __future__ import annotations

import os
import pickle
import re

from cmc.lang import (BuildDecl, ClientDecl, Loc, NodeDecl, ReplyDecl, check_property,
                      evaluate, load_model, unparse)
from langutil import SPEC_EXAMPLE, load, write

# --- the example model of docs/model-file.md (at the top of the page) --------------------

def test_spec_example_every_field(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    path = write(folder, SPEC_EXAMPLE, "durlog.cmc")
    model = load_model(path, {})
    lines = SPEC_EXAMPLE.split("\n")

    def at(line, col):
        return Loc(path, line, col, lines[line - 1])

    assert model.path == path and os.path.isabs(model.path)
    assert model.folder == str(folder)
    assert model.source == SPEC_EXAMPLE
    assert model.params == {"bin": "../demo/build/durlog"}
    assert model.build == BuildDecl("make -C ../demo", str(folder), at(4, 7))
    binary = str(tmp_path / "demo" / "build" / "durlog")
    assert model.nodes == (
        NodeDecl("primary", 0, (binary, "0", "127.0.0.1:7000", "127.0.0.1:7001"), at(6, 16)),
        NodeDecl("backup", 1, (binary, "1", "127.0.0.1:7000", "127.0.0.1:7001"), at(7, 16)),
    )
    assert model.node_names == ("primary", "backup")
    assert model.clients == (
        ClientDecl("alice", "127.0.0.1", 7000, (b"PUT 7\n",), at(9, 8)),
        ClientDecl("bob", "127.0.0.1", 7000, (b"PUT 8\n", b"GET\n"), at(10, 8)),
    )
    assert model.reply == ReplyDecl(re.compile(r"ACK (?P<val>\d+)"), at(11, 7))
    assert model.network == "fifo"
    assert model.budgets == {"crash": 1, "drop": 1, "dup": 0, "fire": None}
    kinds = [(p.kind, p.name, p.loc) for p in model.properties]
    assert kinds == [
        ("invariant", "no_lost_commit", at(17, 11)),
        ("witness", "something_acked", at(19, 9)),
        ("quiescent", "all_answered", at(20, 11)),
        ("action", "durable_grows", at(21, 8)),
        ("eventually", "converges", at(22, 12)),
    ]
    shown = [unparse(p.expr) for p in model.properties]
    assert shown == [
        "(all r in replies: ((r.val in node[0].log) or (r.val in node[1].log)))",
        "(len(replies) > 0)",
        "(len(replies) == 3)",
        "(all i in [0, 1]: (len(durable'[i].log) >= len(durable[i].log)))",
        "(node[0].log == node[1].log)",
    ]
    # the body of no_lost_commit is on the next, indented line
    assert model.properties[0].expr.loc == at(18, 5)


def spec_world(**changes):
    world = {
        "node": [{"log": [7]}, {"log": [7]}], "volatile": [{"log": [7]}, {"log": [7]}],
        "durable": [{"log": [7]}, {"log": [7]}], "alive": [True, True], "crashes": [0, 0],
        "replies": [{"client": "alice", "node": 0, "index": 0, "req": "PUT 7",
                     "raw": "ACK 7", "val": 7}],
        "network": [], "params": {"bin": "x"}, "node_names": ["primary", "backup"],
    }
    world.update(changes)
    return world


def test_spec_example_properties_evaluate(tmp_path):
    model = load(tmp_path, SPEC_EXAMPLE)
    world = spec_world()
    verdicts = [check_property(p, world, world) for p in model.properties]
    assert verdicts == [True, True, False, True, True]
    lost = spec_world(node=[{"log": []}, None])
    assert check_property(model.properties[0], lost) is False
    shrunk = spec_world(durable=[{"log": []}, {"log": [7]}])
    assert check_property(model.properties[3], world, shrunk) is False


def test_model_and_values_pickle(tmp_path):
    """Parallel workers receive the model (and may send values) through pickle."""
    model = load(tmp_path, SPEC_EXAMPLE)
    assert pickle.loads(pickle.dumps(model)) == model
    model = load(tmp_path, 'node a = "/x"\nwitness w: set([1, [2]]) == set([[2], 1, 1])\n')
    value = evaluate(model.properties[0].expr.left, {})
    assert pickle.loads(pickle.dumps(value)) == value


def test_minus_D_overrides_the_spec_param(tmp_path):
    model = load(tmp_path, SPEC_EXAMPLE, {"bin": "/opt/durlog-bug"})
    assert model.params == {"bin": "/opt/durlog-bug"}
    assert model.nodes[0].argv[0] == "/opt/durlog-bug"
