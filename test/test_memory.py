"""What a run takes of the machine: a world costs what its nodes wrote, not the size
of their files, and --max-memory stops a run before the machine runs short
(docs/cmc.md, "Memory"; docs/performance.md, "What a world costs").

The measurements are the test's own, from /proc and the scratch folder, sampled
while cmc runs: the proportional set size of cmc's process tree plus the blocks its
scratch folder takes (written here again, not taken from cmc/resources.py, so that
a mistake there is not measured by itself).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from cmc.engine.search import Search
from cmc.resources import Bound, Usage, _next_wait, pss
from conftest import PROGS, ROOT, TEST_MODELS, counts, run_cmc

MB = 1 << 20


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
    except (OSError, StopIteration):
        return 0


def _blocks(root) -> int:
    total, seen = 0, set()
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def measured_run(tmp_path, *args, timeout: float = 600, samples: list | None = None):
    """cmc with its scratch in tmp_path/scratch; returns (completed process, the
    largest memory + scratch sample); `samples` gets every (memory, scratch) sample."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "cmc", *map(str, args), "--scratch",
                             str(scratch)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    peak, deadline = 0, time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        sample = (sum(_pss(p) for p in _tree(proc.pid)), _blocks(scratch))
        peak = max(peak, sum(sample))
        if samples is not None:
            samples.append(sample)
        time.sleep(0.02)
    out, err = proc.communicate(timeout=60)
    assert not os.listdir(scratch), "the scratch folder was left behind"
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), peak


def prealloc_model(tmp_path, mb: int = 64):
    text = (TEST_MODELS / "prealloc.model").read_text()
    text = text.replace('"../progs/build/prealloc"', f'"{PROGS}/prealloc"')
    path = tmp_path / "prealloc.model"
    path.write_text(text.replace("param mb = 64", f"param mb = {mb}"))
    return path


@pytest.mark.parametrize("fast", ["--fast", pytest.param("--no-fast", marks=pytest.mark.slow)])
def test_a_thousand_worlds_of_preallocated_files_cost_what_was_written(tmp_path, fast):
    """Two 64 MB files (one fallocated, one written with zeros) and 32-byte records:
    over a thousand worlds, cmc and its nodes and its scratch take less than 120 MB
    once the launch's written zeros have become holes (a copy of each world's files
    would be 128 MB a world; cmc, its watcher and 256 held copies of the node take
    80-97 MB, more when the machine is loaded); the fallocated file never takes its
    64 MB (cmc answers fallocate without reserving), so the launch itself is its 64 MB
    of written zeros and no more. Replayed (--no-fast), every world is a launch again, one at a time."""
    samples: list = []
    r, peak = measured_run(tmp_path, "--model-file", prealloc_model(tmp_path), fast,
                           samples=samples)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert counts(r.stdout) == (1905, 1079, 10)
    assert peak < (100 + 64) * MB, f"peak {peak / MB:.1f} MB"
    if fast == "--fast":
        # from the first sample after the launch's written zeros were made holes, to the end
        big = next((i for i, (_, s) in enumerate(samples) if s > 48 * MB), 0)
        after = next((i for i in range(big, len(samples)) if samples[i][1] < 16 * MB), 0)
        rest = max(m + s for m, s in samples[after:])
        assert rest < 120 * MB, f"after the launch: {rest / MB:.1f} MB"


def test_the_bound_stops_a_node_that_fills_a_file(tmp_path):
    (tmp_path / "fill.model").write_text(
        f'node f = "{PROGS}/filler 7200 file"\nclient a -> "127.0.0.1:7200": "go\\n"\n')
    r, peak = measured_run(tmp_path, "--model-file", "fill.model", "--max-memory", "200M",
                           timeout=120)
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-2000:]
    assert "Error: the run would take more than --max-memory 200.0 MB of this machine" \
        in r.stdout
    assert "  node f: file fill: " in r.stdout
    assert "Raise the bound with --max-memory SIZE" in r.stdout
    assert peak < 200 * MB, f"peak {peak / MB:.1f} MB"


def test_the_bound_stops_a_node_that_fills_memory(tmp_path):
    (tmp_path / "fill.model").write_text(
        f'node f = "{PROGS}/filler 7201 memory"\nclient a -> "127.0.0.1:7201": "go\\n"\n'
        'disk off\n')
    r, peak = measured_run(tmp_path, "--model-file", "fill.model", "--max-memory", "300M",
                           timeout=120)
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-2000:]
    assert "--max-memory 300.0 MB" in r.stdout
    # (its process, and the start of it cmc keeps to fork a relaunch from: zygote.py)
    assert re.search(r"^  node f: [\d.]+ MB of memory in [12] process", r.stdout, re.M), r.stdout
    assert peak < 300 * MB, f"peak {peak / MB:.1f} MB"


def test_copies_of_a_python_node_are_counted_once_by_the_bound(tmp_path):
    """Three Python nodes held in up to 256 worlds each: their resident sizes sum to
    gigabytes (a fork adds a whole interpreter's worth to that sum, at gigabytes a
    second), their proportional sizes to a few hundred MB. Only the latter may stop
    the run: CI once saw a 3 GB bound stop such a run after a second, when the
    watcher foresaw the resident sum passing it."""
    r = run_cmc("maelstrom", "lin-kv", "--bin", f"python3 {ROOT}/demo/maelstrom/lin_kv.py",
                "--node-count", "3", "--max-memory", "1G", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert counts(r.stdout) == (360, 293, 17)


def test_max_memory_and_scratch_are_checked(tmp_path):
    for args, said in ((["--max-memory", "lots"], "not a size: 'lots'"),
                       (["--max-memory", "0"], "must be more than 0"),
                       (["--scratch", str(tmp_path / "none")], "is not a directory")):
        r = subprocess.run([sys.executable, "-m", "cmc", "--model-file",
                            str(ROOT / "models" / "durlog.model"), *args], cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert r.returncode == 2 and said in r.stderr, r.stderr


def _room_after_first_sample(bound) -> bool:
    """room_for_more once the watcher has written a sample (it writes within its first
    period; waited for by polling, with a deadline, never for a fixed time)."""
    deadline = time.monotonic() + 30
    while int.from_bytes(os.pread(bound._sample, 8, 0), "little") == 0:
        assert time.monotonic() < deadline, "the watcher wrote no sample"
        time.sleep(0.01)
    bound._roomy = (0.0, False)          # not the answer cached before the sample
    return bound.room_for_more()


def test_more_worlds_are_kept_only_while_the_bound_has_room():
    """The watcher's sample, read back: a bound of which this process takes two fifths
    leaves no room for more kept worlds (the line is 40%, and the watcher's own process
    counts too); one a hundred times larger does. (At twice this process, the watcher
    itself, some 30 MB, took a small pytest past the bound's 90%: the run was stopped.) The engine's rule: 256 always (128 per worker), then up to sixteen times that
    while there is room (docs/design.md, "How many worlds are kept")."""
    assert not Bound(1 << 30, None).room_for_more()        # no watcher: no more room
    mine = pss(os.getpid())
    for limit, roomy in ((5 * mine // 2, False), (100 * mine, True)):
        bound = Bound(limit, None).start()
        try:
            assert _room_after_first_sample(bound) is roomy, (limit, mine)
        finally:
            bound.stop()
    saved = Search.more_room
    try:
        Search.more_room = Search.no_more_room
        assert Search.room(255, 256) and not Search.room(256, 256)
        Search.more_room = staticmethod(lambda: True)
        assert Search.room(4095, 256) and not Search.room(4096, 256)
        assert Search.room(2047, 128) and not Search.room(2048, 128)
    finally:
        Search.more_room = saved


def test_a_sample_far_from_the_bound_reads_no_proportional_sizes():
    """The watcher sums the processes' resident sizes, an upper bound and cheap to read,
    and reads their proportional set sizes only when that sum nears the bound
    (cmc/resources.py, Usage). A process holding 64 MB and its forked copy: far from the
    bound both count the 64 MB they share (resident), near it it counts once
    (proportional)."""
    code = ("import os, sys, time\n"
            "b = bytearray(64 << 20)\n"
            "for i in range(0, len(b), 4096): b[i] = 1\n"
            "if os.fork() == 0: time.sleep(60); os._exit(0)\n"
            "print('ready', flush=True); time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        far, near = Usage(p.pid, None, under=1 << 50), Usage(p.pid, None, under=0)
        assert len(far.memory) == len(near.memory) == 2
        assert far.total >= 128 * MB, far.total
        assert 64 * MB <= near.total <= 100 * MB, near.total
    finally:
        for pid in Usage(p.pid, None, under=1 << 50).memory:
            os.kill(pid, 9)
        p.wait()


def test_the_watcher_waits_by_the_room_and_the_rate():
    """cmc/resources.py, _next_wait: 7.3 ms (a 300 MB bound's base) while nothing grows,
    four times a slow sample far from the bound, sooner as fast growth eats the room, and
    a stop before the room would be gone by the next sample; none once it is gone."""
    base = 0.1 * 300 * MB / (4 << 30)
    assert _next_wait(base, 200 * MB, 0.0, 0.001) == base
    assert _next_wait(base, 200 * MB, 0.0, 0.05) == 0.2              # BUSY: 4 x 50 ms
    assert abs(_next_wait(base, 200 * MB, 1000 * MB, 0.02) - 0.08) < 1e-9   # BUSY still
    assert _next_wait(base, 200 * MB, 1000 * MB, 0.05) is None      # 0.1 s + 2 samples: gone
    assert _next_wait(base, 20 * MB, 1000 * MB, 0.001) == 0.005     # a quarter of it
    assert _next_wait(base, 10 * MB, 3000 * MB, 0.002) is None      # gone by the next one
    assert _next_wait(base, 0, 0.0, 0.001) is None
