"""Shared memory and SysV IPC are the node's (docs/target-contract.md, "Shared
memory"): two worlds never share an object, and none outlives its world or cmc,
however cmc ends. test/progs/ipc.c names its objects with fixed names (/cmc-ipc-test,
SysV key 0x434d4301): a world sharing one with another world, or with an earlier
run, would count from another number, which the exact counts and the model's
invariants catch."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import PROGS, TEST_MODELS, counts, run_cmc

KEY = 0x434d4301
# each node's IPC namespace needs CAP_SYS_ADMIN; CI and the README's machine run as root
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="SysV objects need root here "
                                "(without it cmc refuses shmget: docs/target-contract.md)")


def model(tmp_path, extra: str = ""):
    text = (TEST_MODELS / "ipc.model").read_text().replace('"../progs/build/ipc"',
                                                              f'"{PROGS}/ipc"')
    path = tmp_path / "ipc.model"
    path.write_text(text + extra)
    return path


def host_objects() -> list[str]:
    """What of the program is left on the machine: its POSIX object in /dev/shm, a
    SysV segment with its key, a process of it."""
    left = []
    if os.path.exists("/dev/shm/cmc-ipc-test"):
        left.append("/dev/shm/cmc-ipc-test")
    with open("/proc/sysvipc/shm") as f:
        next(f)
        left += [f"SysV segment {line.split()[0]}" for line in f if int(line.split()[0]) == KEY]
    ps = subprocess.run(["ps", "-eo", "pid=,args="], stdout=subprocess.PIPE, text=True).stdout
    left += [line for line in ps.splitlines() if f"{PROGS}/ipc " in line]
    return left


@needs_root
@pytest.mark.parametrize("fast", ["--fast", "--no-fast"])
def test_each_world_has_its_own_objects(tmp_path, fast):
    path = model(tmp_path)
    first = run_cmc("--model-file", path, fast, cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    assert counts(first.stdout) == (54, 41, 6)
    assert host_objects() == []
    again = run_cmc("--model-file", path, fast, cwd=tmp_path)    # nothing carried over
    assert counts(again.stdout) == (54, 41, 6)


@needs_root
@pytest.mark.parametrize("how", ["Ctrl-C", "SIGKILL"])
def test_nothing_outlives_an_interrupted_run(tmp_path, how):
    path = model(tmp_path).read_text().replace("budget crash 1", "budget crash 3")
    path = path.replace("node[0].posix <= 3", "node[0].posix <= 5")
    path = path.replace('client b -> "127.0.0.1:7500": "y\\n"',
                        'client b -> "127.0.0.1:7500": "y\\n", "z\\n", "w\\n"')
    (tmp_path / "long.model").write_text(path)
    p = subprocess.Popen([sys.executable, "-m", "cmc", "--model-file", "long.model"],
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    deadline = time.monotonic() + 60
    while not host_objects() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_objects(), f"the search never got under way: {p.communicate()}"
    time.sleep(0.5)
    if how == "Ctrl-C":
        os.killpg(p.pid, signal.SIGINT)
    else:
        p.kill()
    p.communicate(timeout=60)
    deadline = time.monotonic() + 20
    while host_objects() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_objects() == []


@pytest.mark.parametrize("where,status", [("sock", 0), ("/tmp/cmc-unix-test.sock", 3),
                                          ("\0cmc-abstract", 3)])
def test_an_af_unix_name_outside_the_directory_is_refused(tmp_path, where, status):
    """A socket file in the node's directory is the node's (and goes with the world);
    one elsewhere, or an abstract name, would be every world's: refused, naming it."""
    (tmp_path / "unix.py").write_text(
        "import os, socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"s.bind({where!r})\n"
        "os.write(3, b'{\"bound\": true}\\n')\n")
    (tmp_path / "unix.model").write_text(f'node n = "{sys.executable} {tmp_path}/unix.py"\n')
    r = run_cmc("--model-file", "unix.model", cwd=tmp_path)
    assert r.returncode == status, r.stdout[-2000:] + r.stderr[-2000:]
    if status:
        said = ("an AF_UNIX socket at /tmp/cmc-unix-test.sock, outside its directory"
                if where.startswith("/") else "an abstract AF_UNIX name")
        assert "called bind(" in r.stdout and said in r.stdout, r.stdout
    assert not os.path.exists("/tmp/cmc-unix-test.sock")
