"""Three more Maelstrom nodes (docs/maelstrom.md, "The workloads"): a grow-only set, a
PN-counter CRDT, and lin-kv on a small Raft, each checked through the real CLI with
exact counts, and each one's planted bug (`-D flags=--bug`) caught with its shortest
counterexample."""
from __future__ import annotations

import pytest

from conftest import ROOT, counts, run_cmc, without_timestamps
from test_maelstrom import steps


def check(model: str, *args):
    return run_cmc("--model-file", f"models/maelstrom/{model}.model", "--max-memory", "3G",
                   *args, cwd=ROOT)


# model: (generated, distinct, depth) of the correct node
CORRECT = {
    "g-set": (423, 380, 19),
    "pn-counter": (241, 207, 16),
    "raft-kv": (790, 573, 20),
}

APPEND_WRITE = ('{"type":"append_entries","term":1,"leader":"n1","prev_index":0,"prev_term":0,'
                '"entries":[{"term":1,"op":{"type":"write","key":1,"value":1}}],"commit":0,')

# model: (the verdict, the steps of the counterexample, its counts)
BUGGY = {
    # n2's acknowledgement of [1] is taken to cover 2 as well, which was added while
    # it was on its way; the gossip that carried 2 is lost, and 2 is never sent again
    "g-set": ("Error: Invariant final_reads_have_every_ack is violated.",
              ['<DELIVER c1 -> n1 {"type":"add","element":1,"msg_id":1}>',
               '<DELIVER c1 -> n1 {"type":"add","element":2,"msg_id":2}>',
               '<DELIVER n1 -> n2 {"type":"merge","elements":[1],"msg_id":1}>',
               '<DELIVER n2 -> n1 {"type":"merge_ok","in_reply_to":1}>',
               '<DROP n1 -> n2 {"type":"merge","elements":[1,2],"msg_id":2}>',
               "<FIRE client c2 starts @ 1.500s>",
               '<DELIVER c2 -> n2 {"type":"add","element":3,"msg_id":1}>',
               '<DELIVER n2 -> n1 {"type":"merge","elements":[3],"msg_id":1}>',
               '<DELIVER n1 -> n2 {"type":"merge_ok","in_reply_to":1}>',
               "<FIRE client r1 starts @ 3.000s>",
               "<FIRE client r2 starts @ 3.000s>",
               '<DELIVER r2 -> n2 {"type":"read","msg_id":1}>'], (191, 174, 13)),
    # one sum per node merged by max: n1's sum fell from 2 to 1, and n2's is -3, below
    # the 0 a node starts from; both lose, and n1 reads 2 where -2 was acknowledged
    "pn-counter": ("Error: Invariant final_reads_count_every_ack is violated.",
                   ['<DELIVER c1 -> n1 {"type":"add","delta":2,"msg_id":1}>',
                    '<DELIVER c1 -> n1 {"type":"add","delta":-1,"msg_id":2}>',
                    '<DELIVER n1 -> n2 {"type":"replicate","sums":{"n1":1}}>',
                    '<DELIVER n1 -> n2 {"type":"replicate","sums":{"n1":2}}>',
                    "<FIRE client c2 starts @ 0.250s>",
                    '<DELIVER c2 -> n2 {"type":"add","delta":-3,"msg_id":1}>',
                    '<DELIVER n2 -> n1 {"type":"replicate","sums":{"n1":2,"n2":-3}}>',
                    "<FIRE n1 pselect6 250ms @ 0.500s>",
                    '<DELIVER n1 -> n2 {"type":"replicate","sums":{"n1":2,"n2":0}}>',
                    '<DELIVER n2 -> n1 {"type":"replicate","sums":{"n1":2,"n2":0}}>',
                    "<FIRE client r1 starts @ 0.750s>",
                    '<DELIVER r1 -> n1 {"type":"read","msg_id":1}>'], (106, 90, 13)),
    # n1 is elected, the write is committed on n1 and n2, its entry to n3 is lost, and
    # n3 answers a later read from its empty store
    "raft-kv": ("Error: Linearizability property kv_is_linearizable is violated.",
                ["<FIRE n1 pselect6 250ms @ 0.250s>",
                 '<DELIVER n1 -> n2 {"type":"request_vote","term":1,"candidate":"n1",'
                 '"last_index":0,"last_term":0,"msg_id":1}>',
                 '<DELIVER n1 -> n3 {"type":"request_vote","term":1,"candidate":"n1",'
                 '"last_index":0,"last_term":0,"msg_id":2}>',
                 '<DELIVER n2 -> n1 {"type":"request_vote_ok","term":1,"granted":true,'
                 '"in_reply_to":1}>',
                 '<DELIVER n3 -> n1 {"type":"request_vote_ok","term":1,"granted":true,'
                 '"in_reply_to":2}>',
                 "<FIRE client c1 starts @ 0.300s>",
                 '<DELIVER c1 -> n1 {"type":"write","key":1,"value":1,"msg_id":1}>',
                 f'<DELIVER n1 -> n2 {APPEND_WRITE}"msg_id":3}}>',
                 '<DELIVER n2 -> n1 {"type":"append_entries_ok","term":1,"success":true,'
                 '"match":1,"in_reply_to":3}>',
                 f'<DROP n1 -> n3 {APPEND_WRITE}"msg_id":4}}>',
                 "<FIRE client c2 starts @ 0.400s>",
                 '<DELIVER c2 -> n3 {"type":"read","key":1,"msg_id":1}>'], (171, 126, 13)),
}


# model: the counterexample's length in states, the initial one included (the bug gate's
# "trace" column)
LENGTH = {"g-set": 13, "pn-counter": 13, "raft-kv": 13}


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_correct_node_holds(name, tmp_path):
    r = check(name, "--trace-out", tmp_path / "t.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Model checking completed. No error has been found." in r.stdout
    assert counts(r.stdout) == CORRECT[name]


@pytest.mark.parametrize("name", sorted(BUGGY))
def test_planted_bug_is_caught(name, tmp_path):
    verdict, path, expected = BUGGY[name]
    r = check(name, "-D", "flags=--bug", "--trace-out", tmp_path / "t.json")
    assert r.returncode == 1, r.stdout + r.stderr
    assert verdict in r.stdout
    assert steps(r.stdout) == path
    assert len(path) + 1 == LENGTH[name]
    assert counts(r.stdout) == expected
    assert (tmp_path / "t.json").exists()


def test_raft_bug_history_names_the_stale_read(tmp_path):
    """The linearizability verdict shows the history: the write acknowledged before the
    read began, and the read that did not see it."""
    r = check("raft-kv", "-D", "flags=--bug", "--trace-out", tmp_path / "t.json")
    assert r.returncode == 1, r.stdout + r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("* c")]
    assert [row[:5] for row in rows] == [["*", "c1", "write", "1", '"1"'],
                                         ["*", "c2", "read", "1", "null"]]


def test_the_same_output_on_every_run(tmp_path):
    """Three Python processes, each step in any order: the same output, byte for byte."""
    args = ("-D", "flags=--bug", "--trace-out", tmp_path / "t.json")
    first, second = check("raft-kv", *args), check("raft-kv", *args)
    assert first.returncode == second.returncode == 1
    assert without_timestamps(first.stdout) == without_timestamps(second.stdout)
