"""The disk (docs/target-contract.md, "The disk"), through the real CLI under the real
filter.

test/progs/disk_ops.c does one way of writing files at its first start, then, at
every start, writes every file of its working directory on fd 3. With `budget crash
1` a search is State 1 (the files as written) and, after the CRASH, what the disk
kept: under `disk fsync partial` one world per prefix of the unsynced writes. Each
case says which outcomes must be reached (each one a witness) and that no other
is (an invariant): a wrong outcome, a missing one or an extra one fails.
"""
from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import MODELS, PROGS, ROOT, counts, run_cmc, without_timestamps

CASES = {
    # mode: {disk: [outcome, ...]}; an outcome: [(name, contents), ...] sorted
    "write": {"fsync": [[("f", "")]], "off": [[("f", "abc")]], "strict": [[]],
              "fsync partial": [[("f", "")], [("f", "abc")]]},
    "fsync": {"fsync": [[("f", "abc")]], "off": [[("f", "abcdef")]], "strict": [[]],
              "fsync partial": [[("f", "abc")], [("f", "abcdef")]]},
    "fdatasync": {"fsync": [[("f", "abc")]], "off": [[("f", "abcdef")]]},
    "pwrite": {"fsync": [[("f", "aaaa")]], "off": [[("f", "aXYa")]],
               "fsync partial": [[("f", "aaaa")], [("f", "aXYa")]]},
    "writev": {"fsync": [[("f", "hello world")]], "off": [[("f", "hello world!")]]},
    "append": {"fsync": [[("f", "one")]], "fsync partial": [[("f", "one")], [("f", "onetwo")]]},
    "osync": {"fsync": [[("f", "sync"), ("g", "dsync")]],
              "fsync partial": [[("f", "sync"), ("g", "dsync")]]},
    "pwritev2": {"fsync": [[("f", "durable")]], "off": [[("f", "durable not")]]},
    "ftruncate": {"fsync": [[("f", "abcdef")]], "off": [[("f", "ab")]],
                  "fsync partial": [[("f", "abcdef")], [("f", "ab")]]},
    "truncate": {"fsync": [[("f", "abcdef")]], "off": [[("f", "abcd")]]},
    "otrunc": {"fsync": [[("f", "abc")]], "off": [[("f", "x")]],
               "fsync partial": [[("f", "abc")], [("f", "")], [("f", "x")]]},
    "fallocate": {"fsync": [[("f", "ab")]]},
    "sync_file_range": {"fsync": [[("f", "waited"), ("g", "")]],
                        "off": [[("f", "waited"), ("g", "started")]]},
    "sync": {"fsync": [[("f", "one"), ("g", "two")]], "strict": [[("f", "one"), ("g", "two")]]},
    "syncfs": {"fsync": [[("f", "one"), ("g", "two")]]},
    "rename": {"fsync": [[("state", "new")]], "strict": [[("state", "old")]],
               "off": [[("state", "new")]]},
    "rename+dir": {"strict": [[("state", "new")]]},
    "mkdir": {"strict": [[]], "fsync": [[("d/", ""), ("d/f", "inner")]]},
    "mkdir+parent": {"strict": [[("d/", ""), ("d/f", "inner")]]},
    "unlink": {"strict": [[("f", "kept")]], "fsync": [[]]},
    "mmap-private": {"fsync": [[("f", "mapped")]]},
    "mmap": {"fsync": [[("f", "mapped")]], "strict": [[("f", "mapped")]],
             "off": [[("f", "stored")]]},
    "mmap+msync": {"fsync": [[("f", "stored")]], "fsync partial": [[("f", "stored")]]},
    "outside": {"fsync": [[("f", "")]], "off": [[("f", "mine")]]},
    "copy": {"fsync": [[("f", ""), ("g", "")]], "off": [[("f", "source"), ("g", "source")]],
             "fsync partial": [[("f", ""), ("g", "")], [("f", "source"), ("g", "")],
                               [("f", "source"), ("g", "source")]]},
    "sendfile": {"fsync": [[("f", "source"), ("g", "")]],
                 "fsync partial": [[("f", "source"), ("g", "")],
                                   [("f", "source"), ("g", "source")]]},
}
PARAMS = [(mode, disk) for mode, by_disk in CASES.items() for disk in by_disk]


def literal(files) -> str:
    return json.dumps([list(f) for f in files])


def model(tmp_path, mode: str, disk: str, outcomes, prog: str = "disk_ops") -> str:
    lines = [f'node n = "{PROGS}/{prog} {mode}"', f"disk {disk}", "budget crash 1",
             "invariant kept_what_it_may:",
             f"    crashes[0] == 0 or node[0].files in [{', '.join(map(literal, outcomes))}]"]
    lines += [f"witness outcome_{i}: crashes[0] == 1 and node[0].files == {literal(o)}"
              for i, o in enumerate(outcomes)]
    path = tmp_path / "disk.model"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("mode,disk", PARAMS, ids=[f"{m}-{d.replace(' ', '_')}" for m, d in PARAMS])
def test_what_a_crash_keeps(tmp_path, mode, disk):
    outcomes = CASES[mode][disk]
    r = run_cmc("--model-file", model(tmp_path, mode, disk, outcomes), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    # State 1, then one world per CRASH action (k+1 of them under fsync partial)
    assert counts(r.stdout) == (1 + len(outcomes), 1 + len(outcomes), 2)


@pytest.mark.parametrize("mode,disk", [("fsync", "fsync"), ("rename", "strict"),
                                       ("otrunc", "fsync partial")])
def test_what_a_crash_keeps_static(tmp_path, mode, disk):
    outcomes = CASES[mode][disk]
    r = run_cmc("--model-file", model(tmp_path, mode, disk, outcomes, "disk_ops-static"),
                cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert counts(r.stdout) == (1 + len(outcomes), 1 + len(outcomes), 2)


def test_a_wrong_outcome_is_seen(tmp_path):
    """The test's own check can fail: the CRASH does not keep an unsynced write."""
    r = run_cmc("--model-file", model(tmp_path, "write", "fsync", [[("f", "abc")]]),
                cwd=tmp_path)
    assert r.returncode == 1
    assert "Error: Invariant kept_what_it_may is violated." in r.stdout


def test_partial_crash_labels_and_what_was_lost(tmp_path):
    outcomes = CASES["otrunc"]["fsync partial"]
    path = model(tmp_path, "otrunc", "fsync partial", outcomes)
    text = path.read_text() + "invariant never_crashed: crashes[0] == 0\n"
    path.write_text(text)
    r = run_cmc("--model-file", path, "--trace-out", tmp_path / "t.json", cwd=tmp_path)
    assert r.returncode == 1
    assert "State 2: <CRASH n (0 of 2 unsynced writes reached disk)>" in r.stdout
    replay = run_cmc("--model-file", path, "--replay", tmp_path / "t.json", cwd=tmp_path)
    out = replay.stdout
    assert "    n unsynced: truncate f to 0\n    n unsynced: write f @0 +1\n" in out
    assert ("    n lost at the crash: truncate f to 0\n"
            "    n lost at the crash: write f @0 +1\n") in out


@pytest.mark.parametrize("mode,call,name", [("splice", "splice", "g")])
def test_what_is_not_modelled_is_refused(tmp_path, mode, call, name):
    path = tmp_path / "refused.model"
    path.write_text(f'node n = "{PROGS}/disk_ops {mode}"\nbudget crash 1\n')
    r = run_cmc("--model-file", path, cwd=tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr
    assert f"called {call}(" in r.stdout + r.stderr
    assert f" {name} " in r.stdout + r.stderr or f"{name}:" in r.stdout + r.stderr
    off = tmp_path / "off.model"
    off.write_text(path.read_text() + "disk off\n")
    r = run_cmc("--model-file", off, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


# -- the three demos (models/appendkv, swapstate, reclog.model) --------------------------
def with_disk(tmp_path, name: str, disk: str):
    """models/NAME.model with its disk line saying `disk`, beside the original (so
    its relative paths still resolve)."""
    text = (MODELS / f"{name}.model").read_text()
    lines = [f"disk {disk}" if line.startswith("disk ") else line for line in text.splitlines()]
    path = MODELS / f".{name}-{disk.replace(' ', '-')}-{tmp_path.name}.model"
    path.write_text("\n".join(lines) + "\n")
    return path


DEMOS = {   # demo: (its disk mode, the property its bug violates)
    "appendkv": ("fsync", "no_lost_write"),
    "swapstate": ("strict", "no_lost_write"),
    "reclog": ("fsync partial", "only_written_values"),
}


@pytest.mark.parametrize("demo", DEMOS)
def test_a_disk_demos_bug_is_caught_under_its_mode_only(tmp_path, demo):
    mode, prop = DEMOS[demo]
    r = run_cmc("--model-file", MODELS / f"{demo}.model", "-D", f"bin=../demo/build/{demo}-bug",
                cwd=tmp_path)
    assert r.returncode == 1 and f"Invariant {prop} is violated." in r.stdout, r.stdout[-3000:]
    weaker = {"fsync": "off", "strict": "fsync", "fsync partial": "fsync"}[mode]
    path = with_disk(tmp_path, demo, weaker)
    try:
        r = run_cmc("--model-file", path, "-D", f"bin=../demo/build/{demo}-bug", cwd=tmp_path)
    finally:
        path.unlink()
    assert r.returncode == 0, r.stdout[-3000:]


def test_reclogs_correct_build_cuts_a_torn_tail_under_partial_only(tmp_path):
    """The correct build's recovery is exercised: under fsync partial a CRASH tears a
    record and recovery cuts it (the witness); under fsync no record is ever torn."""
    for mode, status in (("fsync partial", 0), ("fsync", 1)):
        path = with_disk(tmp_path, "reclog", mode)
        path.write_text(path.read_text() + "witness torn_tail_cut: node[0].cut > 0\n")
        try:
            r = run_cmc("--model-file", path, cwd=tmp_path)
        finally:
            path.unlink()
        assert r.returncode == status, r.stdout[-3000:]
        assert ("Error: Witness torn_tail_cut was never reached." in r.stdout) == (status == 1)


@pytest.mark.parametrize("demo", DEMOS)
def test_a_disk_demo_is_the_same_copied_replayed_and_by_workers(tmp_path, demo):
    bug = ("-D", f"bin=../demo/build/{demo}-bug")
    runs = [run_cmc("--model-file", MODELS / f"{demo}.model", *bug, *extra, cwd=tmp_path)
            for extra in (("--no-fast",), ("--fast",), ("--no-fast", "--workers", "2"))]
    outs = [without_timestamps(r.stdout) for r in runs]
    assert all(r.returncode == 1 for r in runs)
    assert outs[0] == outs[1] == outs[2]


def test_the_html_report_shows_unsynced_writes_and_what_a_crash_lost(tmp_path):
    r = run_cmc("--model-file", MODELS / "reclog.model", "-D", "bin=../demo/build/reclog-bug",
                "--html", tmp_path / "r.html", cwd=tmp_path)
    assert r.returncode == 1, r.stdout[-2000:]
    page = (tmp_path / "r.html").read_text()
    assert "unsynced writes (2)" in page and "write rec.log @0 +34" in page
    assert "lost at the crash (1)" in page and "write rec.log @34 +2" in page


# -- Redis (Debian's redis-server) with its append-only file ----------------------------
REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"
needs_redis = pytest.mark.skipif(not os.path.exists(REDIS), reason="no redis-server")
AOF = ROOT / "experiments" / "redis" / "aof.model"


@needs_redis
def test_redis_with_appendfsync_no_loses_an_acknowledged_write(tmp_path):
    r = run_cmc("--model-file", AOF, "-D", "fsync=no", "--fast", "--max-depth", "8",
                "--trace-out", tmp_path / "t.json", cwd=tmp_path)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Error: Action property acked_write_survives is violated." in r.stdout
    assert [line.split(": ", 1)[1] for line in r.stdout.splitlines()
            if line.startswith("State ")] == [
        "<Initial predicate>", '<DELIVER alice -> redis CONNECT>',
        '<DELIVER alice -> redis "SET k 1\\r\\n">', "<CRASH redis>",
        "<DELIVER bob -> redis CONNECT>", '<DELIVER bob -> redis "GET k\\r\\n">']
    replay = run_cmc("--model-file", AOF, "-D", "fsync=no", "--replay", tmp_path / "t.json",
                     cwd=tmp_path)
    assert ("redis lost at the crash: write appendonlydir/appendonly.aof.1.incr.aof @0 +50"
            in replay.stdout)


@needs_redis
@pytest.mark.slow
def test_redis_with_appendfsync_always_keeps_it(tmp_path):
    r = run_cmc("--model-file", AOF, "--fast", "--max-depth", "7", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert counts(r.stdout) == (1450, 1450, 7)
