"""A shared writable mapping of a node's file under `disk fsync` (docs/target-contract.md,
"The disk"): what a process stores through it is an unsynced write until msync(MS_SYNC),
fsync or fdatasync makes it durable, and a CRASH keeps the durable contents.
test/progs/mmaplog.c logs through a mapping and syncs before each ACK; its bug build
acknowledges first and syncs when the client has gone."""
from __future__ import annotations

import json

from conftest import TEST_MODELS, counts, run_cmc, without_timestamps

MODEL = TEST_MODELS / "mmaplog.model"


def test_a_log_synced_by_msync_holds(tmp_path):
    """Two PUTs, one crash: 54 states, 41 distinct, depth 6, copied (--fast maps the
    copy's file again where the original mapped its own) as replayed (--no-fast)."""
    r = run_cmc("--model-file", MODEL, "--json", tmp_path / "fast.json", cwd=TEST_MODELS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (54, 41, 6)
    report = json.loads((tmp_path / "fast.json").read_text())
    assert report["copies"] > 10 and report["replayed"] == {}
    replay = run_cmc("--model-file", MODEL, "--no-fast", cwd=TEST_MODELS)
    assert without_timestamps(replay.stdout) == without_timestamps(r.stdout)


def test_an_ack_before_the_msync_is_caught():
    """The crash after alice's ACK and before the msync loses 7: its shortest trace is
    deliver, deliver, CRASH."""
    r = run_cmc("--model-file", MODEL, "-D", "mode=bug", cwd=TEST_MODELS)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Invariant acked_is_durable is violated" in r.stdout
    assert "State 4: <CRASH log>" in r.stdout
    assert 'log |-> {"log": []}' in r.stdout.split("State 4:")[1]


def test_without_a_disk_model_the_bug_is_not_seen(tmp_path):
    """Under `disk off` a CRASH keeps every byte stored through the mapping: the bug
    build holds, with the correct build's counts -- the disk model is what finds it."""
    text = MODEL.read_text().replace("disk fsync", "disk off").replace(
        "../progs/build/mmaplog", str(TEST_MODELS.parent / "progs" / "build" / "mmaplog"))
    path = tmp_path / "m.model"
    path.write_text(text)
    r = run_cmc("--model-file", path, "-D", "mode=bug", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert counts(r.stdout) == (54, 41, 6)
