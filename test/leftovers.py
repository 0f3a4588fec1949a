"""What a run of cmc leaves behind, however it ends (issue 11: nothing outlives cmc).

`run_and_end(tmp_path, mode, death)` checks the durlog demo with its binary copied
to a path of its own (so that its node processes are told apart from anyone
else's), in the search `mode`, and ends cmc in the way `death` says: it exits by
itself, it exits on an error (an exception inside the search), Ctrl-C, SIGTERM,
SIGKILL of cmc, or SIGKILL of one of its worker processes. It then returns the
processes of that run still alive and the scratch directories left, after the next
run of cmc (which removes those of runs that are gone).

`python test/leftovers.py` prints the whole table: mode x how cmc died.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODES = {"replay": ["--no-fast"], "--fast": ["--fast"], "--workers 2": ["--no-fast", "--workers", "2"],
         "--fast --workers 2": ["--fast", "--workers", "2"]}
DEATHS = ("exit", "error", "Ctrl-C", "SIGTERM", "SIGKILL", "SIGKILL of a worker")
# the exit status of cmc for each way it ends (SIGKILL: killed by the signal)
STATUS = {"exit": 0, "error": 3, "Ctrl-C": 130, "SIGTERM": 130, "SIGKILL": -9,
          "SIGKILL of a worker": 3}


def _model(tmp: pathlib.Path, long: bool = False, wrap: bool | str = False) -> pathlib.Path:
    """models/durlog.model with the durlog binary copied into tmp (and no witness:
    the runs here end early); `long`: with a crash budget of 3, a search that runs
    for minutes, long enough to be caught in the middle on a loaded machine; `wrap`:
    each node started through demo/durlog-wrap.sh (copied too), a shell that forks
    durlog and waits for it: every node a process tree; `wrap="daemon"`: each node
    started through test/progs/daemonize (copied too), durlog a daemon in a session
    of its own."""
    binary = tmp / "bin" / "durlog"
    binary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "demo" / "build" / "durlog", binary)
    text = (ROOT / "models" / "durlog.model").read_text()
    text = text.replace('param bin = "../demo/build/durlog"', f'param bin = "{binary}"')
    if wrap == "daemon":
        shutil.copy(ROOT / "test" / "progs" / "build" / "daemonize", tmp / "bin" / "daemonize")
        text = text.replace('= "{bin} ', f'= "{tmp / "bin" / "daemonize"} {{bin}} ')
    elif wrap:
        shutil.copy(ROOT / "demo" / "durlog-wrap.sh", tmp / "bin" / "durlog-wrap.sh")
        text = text.replace('= "{bin} ', f'= "{tmp / "bin" / "durlog-wrap.sh"} {{bin}} ')
    text = text.replace('build "make -C ../demo"', "")
    text = text.replace("witness something_acked: len(replies) > 0", "")    # runs end early
    text = re.sub(r"^quiescent .*$", "", text, flags=re.M)     # only the killing is tested
    if long:
        text = text.replace("budget crash 1", "budget crash 3")
    prefix = {False: "", True: "wrap-", "daemon": "daemon-"}[wrap]
    path = tmp / (prefix + ("durlog-long.model" if long else "durlog.model"))
    path.write_text(text)
    return path


def processes(tmp: pathlib.Path) -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every live process of this run: cmc
    itself, its workers (their command line is cmc's) and the node processes."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,stat=,args="], stdout=subprocess.PIPE,
                         text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        pid, ppid, stat, args = line.split(None, 3)
        if str(tmp) in args and not stat.startswith("Z") and int(pid) != os.getpid():
            found.append((int(pid), int(ppid), args))
    return found


def _children(pid: int, tmp: pathlib.Path) -> list[int]:
    """cmc's worker processes (its command line; not the memory watcher, -m cmc.resources)."""
    return [p for p, pp, args in processes(tmp) if pp == pid and "-m cmc " in args]


def _wait_until(what, timeout: float = 60.0, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(step)
    return what()


def _env(tmp: pathlib.Path) -> dict:
    env = dict(os.environ)
    env["TMPDIR"] = str(tmp / "scratch")        # this run's scratch directories, alone
    return env


def cmc(tmp: pathlib.Path, *args, shm: bool = False, **kw) -> subprocess.Popen:
    """cmc in tmp; its scratch directories in tmp/scratch, or with `shm` where cmc puts
    them by itself (/dev/shm when it has room)."""
    env = dict(os.environ) if shm else _env(tmp)
    if shm:
        env.pop("TMPDIR", None)
    return subprocess.Popen([sys.executable, "-m", "cmc", *map(str, args)], cwd=tmp,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, **kw)


def owned_by(pid: int) -> list[str]:
    """The scratch directories (in /dev/shm or the temporary directory) whose OWNER
    is process pid."""
    import tempfile
    found = []
    for root in ("/dev/shm", tempfile.gettempdir()):
        for d in pathlib.Path(root).glob("cmc-*"):
            try:
                if (d / "OWNER").read_text().strip() == str(pid):
                    found.append(str(d))
            except OSError:
                pass
    return found


def run_and_end(tmp: pathlib.Path, mode: str, death: str, wrap: bool | str = False) -> dict:
    (tmp / "scratch").mkdir(exist_ok=True)
    model = _model(tmp)
    args = ["--model-file", _model(tmp, long=death not in ("exit", "error"), wrap=wrap),
            *MODES[mode]]
    if death == "exit":
        # a process tree is replayed slowly (a shell's launch per world): fewer worlds
        args += ["--max-depth", "4" if wrap else "6"]
    elif death == "error":
        args += ["--max-states", "60"]
    p = cmc(tmp, *args)
    if death not in ("exit", "error"):
        workers = 2 if "--workers" in mode else 0
        # wait until the search is under way: node processes (and the workers) run
        # (a loaded machine has taken a minute to start Python and the first node)
        ok = _wait_until(lambda: any(str(tmp / "bin" / "durlog ") in a
                                     for _, _, a in processes(tmp))
                         and len(_children(p.pid, tmp)) >= workers, timeout=300)
        assert ok, f"the search never got under way: {processes(tmp)}"
        if death == "Ctrl-C":
            os.killpg(p.pid, signal.SIGINT)       # as a terminal does: the whole group
        elif death == "SIGTERM":
            p.send_signal(signal.SIGTERM)
        elif death == "SIGKILL":
            p.kill()
        else:
            os.kill(_children(p.pid, tmp)[0], signal.SIGKILL)
    out, err = p.communicate(timeout=300)
    _wait_until(lambda: not processes(tmp), timeout=20)
    left = processes(tmp)
    dirs_before = sorted(os.listdir(tmp / "scratch"))
    # the next run removes the scratch directories of runs that are gone
    nxt = cmc(tmp, "--model-file", model, "--max-depth", "1")
    nxt.communicate(timeout=300)
    return {"status": p.returncode, "stdout": out, "stderr": err, "processes": left,
            "dirs before the next run": dirs_before,
            "dirs": sorted(os.listdir(tmp / "scratch")), "next status": nxt.returncode}


def table() -> None:
    import tempfile
    print(f"{'nodes':13} {'mode':20} {'how cmc died':22} {'exit':>5} {'processes':>9} "
          f"{'dirs (then after the next run)':>32}")
    for wrap in (False, True):
        for mode in MODES:
            for death in DEATHS:
                if death == "SIGKILL of a worker" and "--workers" not in mode:
                    continue
                with tempfile.TemporaryDirectory() as d:
                    r = run_and_end(pathlib.Path(d), mode, death, wrap)
                print(f"{'sh + durlog' if wrap else 'durlog':13} {mode:20} {death:22} "
                      f"{r['status']:>5} {len(r['processes']):>9} "
                      f"{len(r['dirs before the next run']):>26} -> {len(r['dirs'])}")


if __name__ == "__main__":
    table()
