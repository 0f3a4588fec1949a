"""What the tests of the model-file language (test_lang_*.py) share: the example model
file of docs/model-file.md and the history example, how a test writes and loads a
model file, and how it checks a located error; the world the evaluation tests read."""
from __future__ import annotations

import pathlib
import re

import pytest

from cmc.errors import ModelError
from cmc.lang import Model, load_model

SPEC_EXAMPLE = r"""# durlog: a two-node replicated log. The primary must not acknowledge a write
# that one crash can lose.
param bin = "../demo/build/durlog"         # overridable: cmc -D bin=../demo/build/durlog-bug
build "make -C ../demo"                    # optional; run once (cwd = model folder) before checking

node primary = "{bin} 0 127.0.0.1:7000 127.0.0.1:7001"
node backup  = "{bin} 1 127.0.0.1:7000 127.0.0.1:7001"

client alice -> "127.0.0.1:7000": "PUT 7\n"          # one or more requests, sent in order,
client bob   -> "127.0.0.1:7000": "PUT 8\n", "GET\n" # each after the previous one's reply
reply /ACK (?P<val>\d+)/                             # how a reply line becomes a record

network fifo          # fifo (default) | bag
budget crash 1        # crash, drop, dup: default 0; fire: default unlimited
budget drop 1

invariant no_lost_commit:
    all r in replies: r.val in node[0].log or r.val in node[1].log
witness something_acked: len(replies) > 0
quiescent all_answered: len(replies) == 3
action durable_grows: all i in [0, 1]: len(durable'[i].log) >= len(durable[i].log)
eventually converges: node[0].log == node[1].log     # bounded liveness (--live-steps)
"""


def write(tmp_path: pathlib.Path, text: str, name: str = "m.cmc") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def load(tmp_path, text: str, defines=None) -> Model:
    return load_model(write(tmp_path, text), defines or {})


def failure(tmp_path, text: str, defines=None) -> ModelError:
    with pytest.raises(ModelError) as info:
        load(tmp_path, text, defines)
    return info.value


def assert_at(err: ModelError, line: int, col: int, message: str | re.Pattern) -> None:
    """The error renders as FILE:LINE:COL: message, the line, and a caret at COL."""
    assert (err.line, err.col) == (line, col), err.render()
    first, shown, caret = err.render().split("\n")
    prefix = f"{err.file}:{line}:{col}: "
    assert first.startswith(prefix)
    if isinstance(message, str):
        assert first[len(prefix):] == message, first
    else:
        assert message.search(first[len(prefix):]), first
    assert shown == "    " + err.source_line
    assert caret == "    " + " " * (col - 1) + "^"


# A world as the kernel shows one to the properties, and the world after a step.
WORLD = {
    "node": [{"log": [1, 2], "term": 3}, None],
    "volatile": [{"log": [1, 2], "term": 3}, None],
    "durable": [{"log": [1]}, {"log": []}],
    "alive": [True, False],
    "crashes": [0, 1],
    "replies": [{"client": "c", "node": 0, "index": 0, "req": "GET", "raw": "v 5", "v": 5},
                {"client": "c", "node": 0, "index": 1, "req": "GET", "raw": "nope"}],
    "network": [{"src": "primary", "dst": "backup", "data": "hello"}],
    "params": {"n": 3, "s": "abc", "flag": True},
    "node_names": ["primary", "backup"],
}
NEXT = dict(WORLD, durable=[{"log": [1, 2]}, {"log": []}], alive=[True, True])


HISTORY_EXAMPLE = r"""node kv = "/bin/kv 127.0.0.1:7000"
client alice -> "127.0.0.1:7000": "SET x 1\n", "GET x\n"
client bob   -> "127.0.0.1:7000": "SET x 2\n"
reply /OK|VALUE (?P<val>\S+)|NONE/
op write /SET (?P<key>\S+) (?P<val>\S+)/    # docs/model-file.md, "Histories"
op read  /GET (?P<key>\S+)/
linearizable kv_is_linearizable
"""
