"""PostgreSQL 15 as shipped (Debian `postgresql`), unmodified, under cmc (issue 32,
acceptance 3): test/models/postgres*.model, test/pg/.

The data directory is made at build time (the models' `build` line runs
test/pg/initdb.sh into a folder of this module's own, -D pgdata=...); each node copies
it into its working directory at its first launch and runs the server as the user
postgres (test/pg/postgres-node.sh). The ghost client speaks the wire protocol in
`\\xNN` escapes (test/models/postgres.model says how its binary answers make lines).

What holds today:
- the server launches, answers the startup message (AuthenticationOk and the
  ParameterStatus messages) and `SELECT 1` (RowDescription, DataRow "1",
  CommandComplete "SELECT 1"): postgres.model, 4 states;
- a CRASH kills it and the relaunch recovers ("automatic recovery in progress",
  "redo done", "ready to accept connections"): postgres-crash.model, 2 states;
- nothing of it outlives the run: no PostgreSQL.* object in /dev/shm (its dynamic
  shared memory is cmc's, in the node's folder), no SysV segment of the postgres user
  (each launch has its own IPC namespace), no process.

- with a client and a CRASH together (postgres-crash-client.model), the search ends:
  11 states, the same copied (the node is replayed: a process tree) and with
  --no-fast. The answer to the startup message carries BackendKeyData, the process id
  of the backend the postmaster forked: with the host's process ids that answer
  differed from launch to launch, and replaying the same actions found another world
  (`nondeterminism ... at step 2`). A PID namespace for each launch, numbered from 1,
  makes the backend's id the same on every launch: `machine pids private`, or, with
  no `machine pids` line, cmc's own choice for a node whose start makes process groups
  (the postmaster's children each call setsid). postgres-pid.model shows both with a
  few lines of Python that answer with their pid. Under --det PostgreSQL is still found out: its cancel key (the other
  half of BackendKeyData) changes when the stack is shifted.
"""
from __future__ import annotations

import json
import os
import pathlib
import pwd
import shutil

import pytest

from conftest import TEST_MODELS, counts, run_cmc

POSTGRES = pathlib.Path("/usr/lib/postgresql/15/bin/postgres")
INITDB = POSTGRES.parent / "initdb"


def _postgres_user() -> bool:
    try:
        pwd.getpwnam("postgres")
        return True
    except KeyError:
        return False


pytestmark = [
    pytest.mark.skipif(not (POSTGRES.exists() and INITDB.exists()),
                       reason="PostgreSQL 15 is not installed (Debian: postgresql)"),
    # PostgreSQL always makes a SysV segment; cmc gives each launch an IPC namespace only
    # as root (without it shmget is refused: docs/target-contract.md, "Shared memory")
    pytest.mark.skipif(os.geteuid() != 0, reason="PostgreSQL's SysV segment needs root here"),
    pytest.mark.skipif(shutil.which("setpriv") is None or not _postgres_user(),
                       reason="as root the server runs as the user postgres, with setpriv"),
]

MAX_MEMORY = "3G"


@pytest.fixture(scope="module")
def pgdata(tmp_path_factory):
    """Where the models' build line makes the data directory (once for the module)."""
    return tmp_path_factory.mktemp("postgres") / "data"


def check(model: str, pgdata, tmp_path, *args):
    return run_cmc("--model-file", TEST_MODELS / model, "-D", f"pgdata={pgdata}",
                   "--max-memory", MAX_MEMORY, *args, cwd=tmp_path, timeout=900)


def leftovers() -> list[str]:
    """What a run could leave of PostgreSQL on this machine: a POSIX shared-memory
    object (PostgreSQL.NNN), a SysV segment of the postgres user, a process of the
    postgres user whose working directory (in a scratch directory) is gone."""
    left = [f"/dev/shm/{n}" for n in os.listdir("/dev/shm") if n.startswith("PostgreSQL.")]
    uid = pwd.getpwnam("postgres").pw_uid
    with open("/proc/sysvipc/shm") as f:
        header = next(f).split()
        for line in f:
            row = dict(zip(header, line.split()))
            if int(row["uid"]) == uid or int(row["cuid"]) == uid:
                left.append(f"SysV segment {row['shmid']} of postgres")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            cwd = os.readlink(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cwd.endswith(" (deleted)") or not os.path.exists(cwd):
            left.append(f"process {pid}: {cmd} in {cwd}")
    return left


def test_startup_and_select_1(pgdata, tmp_path):
    r = check("postgres.model", pgdata, tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "Model checking completed. No error has been found." in r.stdout
    # launch; the CONNECT; the startup message (its answer is a line, and the query goes
    # out); the query, answered: witnesses `started` and `selected`, and the quiescent
    # `both_answered` in the last world
    assert counts(r.stdout) == (4, 4, 4)
    assert leftovers() == []


def test_relaunched_after_crash(pgdata, tmp_path):
    r = check("postgres-crash.model", pgdata, tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert counts(r.stdout) == (2, 2, 2)           # launch, CRASH (and the relaunch)
    assert leftovers() == []
    # what the relaunched server did: the replay of that one step shows its stderr
    trace = tmp_path / "crash.trace.json"
    trace.write_text(json.dumps({
        "cmc_trace": 1, "model": str(TEST_MODELS / "postgres-crash.model"),
        "params": {"pgdata": str(pgdata)},
        "budgets": {"crash": 1, "drop": 0, "dup": 0, "fire": 0}, "network": "fifo",
        "live_steps": 100, "channel_cap": 64, "mode": "bfs",
        "property": {"kind": "witness", "name": "relaunched"},
        "suffix_from": None, "loop_to": None, "why": None, "walk_seed": None,
        "actions": [{"key": ["CRASH", 0], "label": "CRASH pg"}]}))
    r = run_cmc("--replay", trace, "--max-memory", MAX_MEMORY, cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    before, crash, after = r.stdout.partition("State 2: <CRASH pg>")
    assert crash, r.stdout[-3000:]
    assert "database system is ready to accept connections" in before
    for line in ("database system was not properly shut down; automatic recovery in progress",
                 "redo done at", "database system is ready to accept connections"):
        assert line in after, r.stdout[-5000:]
    assert "/\\ crashes = [pg |-> 1]" in after and "/\\ alive = [pg |-> TRUE]" in after
    assert leftovers() == []


NONDETERMINISM = ("Error: nondeterminism: replaying the same actions gave a different world "
                  "at step 2")


@pytest.mark.slow
def test_startup_and_select_1_with_a_crash(pgdata, tmp_path):
    """Acceptance 3 as a whole: the client of postgres.model and `budget crash 1`, with
    no `machine pids` line (issue 52): cmc gives the node a PID namespace of its own
    for its process groups, every witness (started, selected, relaunched) is reached,
    the same with every world replayed from launch."""
    r = check("postgres-crash-client.model", pgdata, tmp_path)
    assert leftovers() == []
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "Model checking completed. No error has been found." in r.stdout
    assert "Node pg made a process group of its own at its start" in r.stdout
    assert counts(r.stdout) == (11, 11, 5)
    replayed = check("postgres-crash-client.model", pgdata, tmp_path, "--no-fast")
    assert replayed.returncode == 0 and counts(replayed.stdout) == (11, 11, 5)
    assert leftovers() == []


def test_a_reply_with_the_pid_replays(tmp_path):
    """What stopped the test above, in a few lines of Python: a reply with the node's
    pid. With its own PID namespace the node is process 1 on every launch ("PID 1");
    without it (the host's ids) a replay finds another world."""
    model = TEST_MODELS / "postgres-pid.model"
    r = run_cmc("--model-file", model, "--no-fast", "--max-memory", MAX_MEMORY,
                "--trace-out", tmp_path / "t.json", cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert counts(r.stdout) == (3, 3, 3)
    shared = tmp_path / "shared.model"
    shared.write_text(model.read_text().replace("machine pids private", "machine pids shared")
                      .replace("{model_dir}", str(TEST_MODELS)))
    r = run_cmc("--model-file", shared, "--no-fast", "--max-memory", MAX_MEMORY,
                cwd=tmp_path, timeout=900)
    assert r.returncode == 3
    assert f'{NONDETERMINISM} (DELIVER c -> n "HELLO\\n")' in r.stdout, r.stdout[-2000:]
