"""cmc/lang/transactions.py: Elle's anomalies in small histories of Maelstrom's txn
workloads, each the smallest that shows it (docs/model-file.md, `transactional`)."""
import pytest

from cmc.lang.transactions import LEVELS, Txn, anomalies, forbidden, txn_of

N = None


def txn(*mops, status="ok", at=None):
    """A transaction acknowledged (`at`: its invoke and complete events)."""
    invoke, complete = at or (0, 100)
    return txn_of([list(m) for m in mops], [list(m) for m in mops], status, invoke,
                  complete, "c")


CASES = [
    # rw-register
    ("a write then a read of it", [txn(["w", 1, 1]), txn(["r", 1, 1])], set(), set()),
    ("an intermediate read (G1b)", [txn(["w", 1, 1], ["w", 1, 2]), txn(["r", 1, 1])],
     {"G1b"}, None),
    ("a read of a failed write (G1a)",
     [txn(["w", 1, 1], status="fail"), txn(["r", 1, 1])], {"G1a"}, None),
    ("each reads the other's write (G1c)",
     [txn(["w", 1, 1], ["r", 2, 1]), txn(["w", 2, 1], ["r", 1, 1])], {"G1c"}, None),
    ("read skew (G-single)",
     [txn(["w", 1, 1], ["w", 2, 1]), txn(["r", 1, N], ["r", 2, 1])], {"G-single"}, None),
    ("write skew (G2-item)",
     [txn(["r", 1, N], ["r", 2, N], ["w", 1, 1]), txn(["r", 1, N], ["r", 2, N], ["w", 2, 1])],
     {"G2-item"}, None),
    ("a stale read after the write was acknowledged",
     [txn(["w", 1, 1], at=(0, 1)), txn(["r", 1, N], at=(2, 3))], set(),
     {"G-single-realtime"}),
    ("the same stale read, concurrent with the write",
     [txn(["w", 1, 1], at=(0, 2)), txn(["r", 1, N], at=(1, 3))], set(), set()),
    ("a read that misses the transaction's own write (internal)",
     [txn(["w", 1, 1], ["r", 1, 2]), txn(["w", 1, 2])], {"internal"}, None),
    ("versions that go round (cyclic-versions; each read the other: G1c)",
     [txn(["r", 1, 1], ["w", 1, 2]), txn(["r", 1, 2], ["w", 1, 1])],
     {"cyclic-versions", "G1c"}, None),
    # list-append
    ("appends read in order", [txn(["append", 1, 1]), txn(["append", 1, 2]),
                               txn(["r", 1, [1, 2]])], set(), set()),
    ("two orders of one list (incompatible-order)",
     [txn(["append", 1, 1]), txn(["append", 1, 2]), txn(["r", 1, [1, 2]]),
      txn(["r", 1, [2]])], {"incompatible-order"}, None),
    ("two keys appended in opposite orders (G0)",
     [txn(["append", 1, 1], ["append", 2, 1]), txn(["append", 1, 2], ["append", 2, 2]),
      txn(["r", 1, [1, 2]], ["r", 2, [2, 1]])], {"G0"}, None),
    ("an element twice (duplicate-elements)",
     [txn(["append", 1, 1]), txn(["r", 1, [1, 1]])], {"duplicate-elements"}, None),
    ("a list read mid-transaction (G1b)",
     [txn(["append", 1, 1], ["append", 1, 2]), txn(["r", 1, [1]])], {"G1b"}, None),
    ("a transaction's own appends seen (internal holds)",
     [txn(["r", 1, N], ["append", 1, 1], ["r", 1, [1]])], set(), set()),
    ("a list read as a number: a malformed answer, unknown",
     [txn(["append", 1, 1]), txn(["r", 1, 1]), txn(["r", 1, [1]])], set(), set()),
    ("a transaction's own append unseen (internal)",
     [txn(["append", 1, 1], ["r", 1, N])], {"internal"}, None),
]


@pytest.mark.parametrize("what,history,plain,timed", CASES, ids=[c[0] for c in CASES])
def test_anomalies_as_elle_names_them(what, history, plain, timed):
    assert anomalies(history, realtime=False) == plain
    assert anomalies(history, realtime=True) == (plain if timed is None else timed)


def test_levels_forbid_what_elle_says():
    assert forbidden("read-uncommitted") == {"G0", "duplicate-elements", "cyclic-versions"}
    assert "G1b" in forbidden("read-committed") and "G2-item" not in forbidden("read-committed")
    assert {"G-single", "G2-item", "internal"} <= forbidden("serializable")
    assert "G-single-realtime" not in forbidden("serializable")
    assert forbidden(LEVELS[-1]) >= forbidden("serializable") | {"G-single-realtime"}


def test_an_answer_that_is_not_the_request_is_unknown():
    t = txn_of([["w", 1, 1]], [["w", 1, 2]], "ok", 0, 1, "c")
    assert t.status == "info" and t.complete is None and t.mops == (("w", "1", 1),)
    assert isinstance(txn_of([["r", 1, None]], [["r", 1, [1]]], "ok", 0, 1, "c"), Txn)
