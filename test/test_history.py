"""Histories and linearizability, end to end through the real CLI. The two demos of a
non-linearizable history (demo/pbkv.c: a stale read at a backup; demo/register.c: an
acknowledged write lost by a CRASH), the history as the text, JSON and trace replay
show it, that a linearizable property leaves a model's counts as they were, and Redis
(Debian's redis-server) checked for linearizability under the disk model."""
from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from conftest import MODELS, ROOT, counts, run_cmc

BUILD = ROOT / "demo" / "build"


@pytest.fixture(params=["fast", pytest.param("replay", marks=pytest.mark.slow)])
def mode(request) -> tuple[str, ...]:
    return ("--fast",) if request.param == "fast" else ("--no-fast",)


def labels(out: str) -> list[str]:
    return re.findall(r"^State \d+: <(.*)>$", out, re.M)


def history_table(out: str) -> list[str]:
    """The lines of the history table, its heading first, as printed."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("The history: "))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(("  ", "* ")))
    return lines[start:end]


def without(path, tmp_path, *patterns: str, name: str = "m.model"):
    """A copy of the model at `path` with the lines matching `patterns` taken out and
    relative paths made absolute (it is written to tmp_path)."""
    text = path.read_text()
    for pattern in patterns:
        text = re.sub(pattern, "", text, flags=re.M)
    text = text.replace('"../demo/build/', f'"{BUILD}/').replace('build "make -C ../demo"', "")
    out = tmp_path / name
    out.write_text(text)
    return out


# -- pbkv: the backup answers a read it has not applied (no fault needed) ---------------------

PBKV = MODELS / "pbkv.model"


def test_pbkv_correct_build_is_linearizable(mode):
    r = run_cmc("--model-file", PBKV, *mode, cwd=MODELS)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert counts(r.stdout) == (123, 91, 12)


def test_pbkv_bug_is_a_stale_read(tmp_path, mode):
    r = run_cmc("--model-file", PBKV, "-D", "bin=../demo/build/pbkv-bug", *mode,
                "--json", tmp_path / "r.json", "--trace-out", tmp_path / "t.json", cwd=MODELS)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    assert "Error: Linearizability property kv_is_linearizable is violated." in r.stdout
    assert counts(r.stdout) == (62, 39, 7)
    assert labels(r.stdout) == [
        "Initial predicate", "DELIVER primary -> backup CONNECT",
        "DELIVER reader -> backup CONNECT", "DELIVER writer -> primary CONNECT",
        'DELIVER writer -> primary "SET x 1\\n"', 'DELIVER reader -> backup "GET x\\n"',
        'DELIVER reader -> backup "GET x\\n"']
    assert history_table(r.stdout) == [
        "The history: 4 operations; no sequential order of the operations on key x (marked *) "
        "explains what their clients saw:",
        "  client  op     key  value  request    reply      invoked at  completed at",
        '* writer  write  x    "1"    "SET x 1"  "OK x 1"   state 1     state 5',
        '* reader  read   x    null   "GET x"    "NONE x"   state 1     state 6',
        '* writer  write  x    "2"    "SET x 2"  (pending)  state 5     -',
        '* reader  read   x    null   "GET x"    "NONE x"   state 6     state 7']
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["property"] == {"kind": "linearizable", "name": "kv_is_linearizable"}
    assert [(h["client"], h["kind"], h["key"], h["value"], h["reply"], h["invoked"],
             h["completed"], h["invoke_event"], h["complete_event"], h["violating"])
            for h in report["history"]] == [
        ("writer", "write", "x", "1", "OK x 1", 1, 5, 1, 3, True),
        ("reader", "read", "x", None, "NONE x", 1, 6, 2, 5, True),
        ("writer", "write", "x", "2", None, 5, None, 4, None, True),
        ("reader", "read", "x", None, "NONE x", 6, 7, 6, 7, True)]
    again = run_cmc("--replay", tmp_path / "t.json", cwd=MODELS)
    assert again.returncode == 1, again.stdout[-3000:] + again.stderr[-2000:]
    assert history_table(again.stdout) == history_table(r.stdout)


def test_pbkv_bug_passes_every_invariant(tmp_path):
    """Only the history tells the builds apart: without the linearizable line, the bug
    build passes every invariant and reaches every witness of the shipped model."""
    model = without(PBKV, tmp_path, r"^linearizable .*$")
    r = run_cmc("--model-file", model, "-D", f"bin={BUILD / 'pbkv-bug'}", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert counts(r.stdout) == (278, 186, 12)


def test_a_linearizable_property_changes_no_count(tmp_path):
    """The history is not in the fingerprint (it follows from the replies in their order
    and each client's next request): the same model with and without its op lines and
    linearizable property gives the same counts."""
    plain = without(PBKV, tmp_path, r"^linearizable .*$", r"^op .*$", name="plain.model")
    a = run_cmc("--model-file", plain, cwd=tmp_path)
    b = run_cmc("--model-file", without(PBKV, tmp_path), cwd=tmp_path)
    assert a.returncode == b.returncode == 0, a.stdout[-2000:] + b.stdout[-2000:]
    assert counts(a.stdout) == counts(b.stdout) == (123, 91, 12)


# -- register: an acknowledged write lost by a CRASH; pending ones may go either way --------

REGISTER = MODELS / "register.model"


def test_register_correct_build_is_linearizable(mode):
    """Its witnesses: a pending write lost by the crash (the reader reads the old value)
    and one that survived it (the reader reads the new value, never acknowledged). Both
    are linearizable only because the write was pending."""
    r = run_cmc("--model-file", REGISTER, *mode, cwd=MODELS)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert counts(r.stdout) == (276, 196, 10)


def test_register_bug_loses_an_acknowledged_write(tmp_path, mode):
    r = run_cmc("--model-file", REGISTER, "-D", "bin=../demo/build/register-bug", *mode,
                "--trace-out", tmp_path / "t.json", cwd=MODELS)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    assert "Error: Linearizability property register_is_linearizable is violated." in r.stdout
    assert counts(r.stdout) == (230, 164, 7)
    assert labels(r.stdout) == [
        "Initial predicate", "DELIVER writer -> server CONNECT",
        'DELIVER writer -> server "SET 1\\n"',
        "CRASH server (0 of 1 unsynced writes reached disk)",
        "DELIVER reader -> server CONNECT", 'DELIVER reader -> server "GET\\n"',
        'DELIVER reader -> server "GET\\n"']
    assert history_table(r.stdout) == [
        "The history: 4 operations; no sequential order of the operations on the one "
        "register (marked *) explains what their clients saw:",
        "  client  op     key  value  request  reply      invoked at  completed at",
        '* writer  write  -    "1"    "SET 1"  "OK 1"     state 1     state 3',
        '* reader  read   -    null   "GET"    "EMPTY"    state 1     state 6',
        '* writer  write  -    "2"    "SET 2"  (pending)  state 3     -',
        '* reader  read   -    null   "GET"    "EMPTY"    state 6     state 7']


def test_register_bug_needs_the_crash(tmp_path):
    model = without(REGISTER, tmp_path, r"^budget crash 1$", r"^witness (.*)(\n[ \t]+.*)*$")
    r = run_cmc("--model-file", model, "-D", f"bin={BUILD / 'register-bug'}", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert counts(r.stdout) == (142, 100, 8)


# -- the HTML report: the history as a timeline beside the chart ----------------------------

def test_html_report_draws_the_history(tmp_path):
    """The register-bug counterexample's page: one lane per client right of the
    lifelines, each operation a bar from the row it was invoked in to the row it
    completed in; in a real browser, the side panel's table of the operations so far.
    CMC_SCREENSHOT_HISTORY=PATH saves the picture (docs/img/register-bug-history.png)."""
    from browser import CHROMIUM, Browser
    page = tmp_path / "r.html"
    r = run_cmc("--model-file", REGISTER, "-D", "bin=../demo/build/register-bug",
                "--html", page, "--trace-out", tmp_path / "t.json", cwd=MODELS)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    html = page.read_text()
    assert html.count('<g class="op') == 4 and html.count('<g class="op bad') == 4
    assert html.count('<g class="op bad pending"') == 1           # SET 2, reset by the crash
    assert "the operations of client writer" in html and "the operations of client reader" in html
    assert "writer: write, &quot;SET 1&quot; → &quot;OK 1&quot;; invoked at state 1, " \
           "completed at state 3" in html
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no headless browser: {CHROMIUM} is missing (Debian: apt-get install "
                    "chromium)")
    shown = "document.querySelector('.panel:not([hidden])')"
    with Browser(width=1600, height=760) as b:
        b.open(page.as_uri() + "#step=3")                  # State 4, the CRASH
        ops = b.eval(f"[...{shown}.querySelectorAll('table.ops tr')].map(e => e.innerText)")
        assert [row.split("\t") for row in ops] == [
            ["client", "op", "request", "reply", "invoked", "completed"],
            ["writer", "write", '"SET 1"', '"OK 1"', "1", "3"],
            ["reader", "read", '"GET"', "pending", "1", ""],
            ["writer", "write", '"SET 2"', "pending", "3", ""]]
        bars = b.eval("[...document.querySelectorAll('.timeline .op line')].map(l => "
                      "[l.getBBox().y, l.getBBox().height])")
        rows = b.eval("[...document.querySelectorAll('.step .bg')].map(r => "
                      "[r.getBBox().y, r.getBBox().height])")
        # each bar starts in the row of its invoke and ends in the row of its complete
        inside = [[i for i, (top, h) in enumerate(rows) if top <= y < top + h][0]
                  for y, _ in bars]
        ends = [[i for i, (top, h) in enumerate(rows) if top <= y + hh <= top + h][0]
                for y, hh in bars]
        assert list(zip(inside, ends)) == [(0, 2), (0, 5), (2, 6), (5, 6)]
        b.open(page.as_uri())
        if os.environ.get("CMC_SCREENSHOT_HISTORY"):
            b.screenshot(os.environ["CMC_SCREENSHOT_HISTORY"])


# -- Redis (Debian's redis-server), unmodified: linearizable under the disk model -----------

REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"
needs_redis = pytest.mark.skipif(not os.path.exists(REDIS), reason="no redis-server")
REDIS_MODEL = ROOT / "experiments" / "redis" / "linearizable.model"
EVAL = "EVAL \\\"return tonumber(redis.call('get', KEYS[1]))\\\" 1 k\\r\\n"


@pytest.mark.slow
@needs_redis
def test_redis_with_appendfsync_no_is_not_linearizable(tmp_path):
    """A CRASH after +OK loses the write from the page cache; bob, whose CONNECT
    reached the relaunched server, reads k as nil twice, the second time after the OK."""
    r = run_cmc("--model-file", REDIS_MODEL, "-D", "fsync=no", "--max-depth", "7",
                "--trace-out", tmp_path / "t.json", cwd=tmp_path)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
    assert "Error: Linearizability property redis_is_linearizable is violated." in r.stdout
    assert labels(r.stdout) == [
        "Initial predicate", "DELIVER alice -> redis CONNECT",
        'DELIVER alice -> redis "SET k 1\\r\\n"', "CRASH redis",
        "DELIVER bob -> redis CONNECT", f'DELIVER bob -> redis "{EVAL}"',
        f'DELIVER bob -> redis "{EVAL}"']
    table = history_table(r.stdout)
    assert [line.split()[:5] for line in table[2:]] == [
        ["*", "alice", "write", "k", '"1"'], ["*", "bob", "read", "k", "null"],
        ["*", "alice", "write", "k", '"2"'], ["*", "bob", "read", "k", "null"]]
    assert table[2].endswith('"+OK"      state 1     state 3')
    assert table[4].endswith("(pending)  state 3     -")


@needs_redis
@pytest.mark.slow
def test_redis_with_appendfsync_always_is_linearizable(tmp_path):
    r = run_cmc("--model-file", REDIS_MODEL, "--max-depth", "7", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert counts(r.stdout) == (2116, 2116, 7)
