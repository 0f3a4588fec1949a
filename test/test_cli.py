"""The command line says what the documentation says: TLC's wording, the exit statuses
(cmc's and TLC's), the JSON report, and docs/errors.md checked against the code."""
from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import signal

import pytest

from conftest import MODELS, DROP, PROGS, ROOT, cmc, counter, counts, run_cmc



# -- TLC's wording ---------------------------------------------------------------------------

def test_statistics_in_tlc_wording(tmp_path):
    r = cmc(tmp_path, counter(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    # the opening line names what is checked, as TLC's do
    assert lines[0] == (f"cmc 0.1.0: breadth-first search of {tmp_path}/counter.model: nodes "
                        "counter; clients a, b; budgets none; "
                        "time async; network fifo; disk fsync.")
    assert re.fullmatch(r"Starting\.\.\. \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\)", lines[1])
    assert lines[2] == "Computing initial states..."
    assert re.fullmatch(r"Finished computing initial states: 1 distinct state generated at "
                        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.", lines[3])
    # 9 distinct states, 13 generated: 9 * (13 - 9) / 2^128 = 1.06e-37; then the coverage
    assert lines[4:14] == [
        "Model checking completed. No error has been found.",
        "  Estimates of the probability that TLC did not check all reachable states",
        "  because two distinct states had the same fingerprint:",
        "  calculated (optimistic):  val = 1.1E-37",
        "13 states generated, 9 distinct states found, 0 states left on queue.",
        "The depth of the complete state graph search is 5.",
        "Coverage: (all of it with --coverage)",
        "  Steps taken: DELIVER 12.",
        "  Held for a reason: invariant count_in_range 9 of 9 worlds.",
        "  Worlds with a reply to: a 0, b 0.",
    ]
    assert re.fullmatch(r"Finished in \d\ds at \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\)", lines[14])
    assert len(lines) == 15 and r.stderr == ""


def test_help_and_version():
    r = run_cmc("--help")
    assert r.returncode == 0 and "--live-steps K" in r.stdout
    r = run_cmc("--version")
    assert r.returncode == 0 and r.stdout.startswith("cmc ")


# -- errors: located, exit 2, never a traceback ------------------------------------------------

def test_syntax_error_is_located(tmp_path):
    model = tmp_path / "bad.model"
    model.write_text('node n = "/bin/cat"\ninvariant p: 1 < 2 < 3\n')
    r = run_cmc("--model-file", model, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr == (f"{model}:2:20: unexpected '<'; expected an operator or the end of "
                        "the line (comparisons do not chain: write a < b and b < c)\n"
                        "    invariant p: 1 < 2 < 3\n"
                        "                       ^\n")
    assert r.stdout == ""
    r = run_cmc("--model-file", model, "--tlc-exit-codes", cwd=tmp_path)
    assert r.returncode == 150


def test_the_grammars_tables_are_kept_and_a_bad_copy_is_made_again(tmp_path):
    """docs/cmc.md, "Files cmc writes": the parse tables are written to the cache
    directory by the first run and read by the next; a file that is not lark's (or is
    of another grammar) is built again and written over; with no directory to write
    in, every run builds them. The syntax error's message is the same every way."""
    model = tmp_path / "bad.model"
    model.write_text('node n = "/bin/cat"\ninvariant p: 1 < 2 < 3\n')
    cache = tmp_path / "cache"
    tables = cache / "cmc" / "model-grammar.lark-tables"

    def run(where):
        r = run_cmc("--model-file", model, cwd=tmp_path, env={"XDG_CACHE_HOME": str(where)})
        assert r.returncode == 2 and r.stdout == "", r.stderr
        return r.stderr
    first = run(cache)
    assert "bad.model:2:20: unexpected '<'" in first
    made = tables.read_bytes()
    digest = made.split(b"\n", 1)[0]
    assert digest.isalnum() and len(made) > 10_000
    assert run(cache) == first and tables.read_bytes() == made      # read, not written
    for bad in (b"not lark's\n" + made[100:], b"0" * 64 + b"\n" + made[65:], b""):
        tables.write_bytes(bad)
        assert run(cache) == first
        again = tables.read_bytes()        # (lark's pickle differs from run to run)
        assert again.split(b"\n", 1)[0] == digest and abs(len(again) - len(made)) < 1000
        assert run(cache) == first and tables.read_bytes() == again
    (tmp_path / "a-file").write_text("")
    assert run(tmp_path / "a-file") == first        # not a directory: nothing kept
    assert run("relative") == first                 # not a place (XDG): ~/.cache
    assert not (tmp_path / "relative").exists()


@pytest.mark.parametrize("args, message", [
    ([], "cmc: the following arguments are required: --model-file"),
    (["--dfs", "3", "--simulate"], "cmc: --dfs and --simulate are two different searches"),
    (["--seed", "4"], "cmc: --seed goes with --simulate or --seconds"),
    (["--walks", "4"], "cmc: --walks goes with --simulate"),
    (["--swarm"], "cmc: --swarm goes with --simulate (--seconds' walks are a swarm"),
    (["--live-steps", "-1"], "cmc: argument --live-steps: must be at least 0, got -1"),
    (["--frobnicate"], "cmc: unrecognized arguments: --frobnicate"),
])
def test_usage_errors(tmp_path, args, message):
    model = [] if not args else ["--model-file", counter(tmp_path)]
    r = run_cmc(*model, *args, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith(message), r.stderr
    assert "Traceback" not in r.stderr
    r = run_cmc(*model, *args, "--tlc-exit-codes", cwd=tmp_path)
    assert r.returncode == 151


def test_missing_binary_is_a_model_error_after_loading(tmp_path):
    model = tmp_path / "m.model"
    model.write_text('node n = "./nowhere 1 2"\n')
    r = run_cmc("--model-file", model, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith(f"{model}:1:10: node n: binary not found: {tmp_path}/nowhere")
    assert run_cmc("--model-file", model, "--tlc-exit-codes", cwd=tmp_path).returncode == 151


# -- exit statuses, cmc's and TLC's --------------------------------------------------------------

@pytest.mark.parametrize("extra, status, tlc", [
    ("", 0, 0),
    ("invariant p: node[0].count < 2\n", 1, 12),
    (DROP + "quiescent p: node[0].count == 2\n", 1, 12),
    ("action p: node'[0].count == node[0].count\n", 1, 13),
    (DROP + "eventually p: node[0].count == 2\n", 1, 13),
    ("witness p: node[0].count == 3\n", 1, 255),
])
def test_exit_statuses(tmp_path, extra, status, tlc):
    model = counter(tmp_path, extra)
    assert cmc(tmp_path, model).returncode == status
    assert cmc(tmp_path, model, "--tlc-exit-codes").returncode == tlc


def test_engine_error_exit_statuses(tmp_path):
    model = counter(tmp_path)
    assert cmc(tmp_path, model, "--max-states", "2").returncode == 3
    assert cmc(tmp_path, model, "--max-states", "2", "--tlc-exit-codes").returncode == 255


# -- the JSON report -------------------------------------------------------------------------

def report(tmp_path, *args, model=None):
    path = tmp_path / "report.json"
    r = cmc(tmp_path, model or counter(tmp_path), "--json", path, *args)
    return r, json.loads(path.read_text())


def test_json_report_when_every_property_holds(tmp_path):
    r, data = report(tmp_path)
    assert r.returncode == 0
    assert data["cmc_report"] == 1 and data["mode"] == "bfs"
    assert data["verdict"] == "ok" and data["exit_status"] == 0
    assert data["counts"] == {"generated": 13, "distinct": 9, "left_on_queue": 0}
    assert data["depth"] == 5 and data["bounded"] is False
    assert data["property"] is None and data["error"] is None and data["trace"] == []
    assert data["collision_probability"] == pytest.approx(9 * 4 / 2**128)
    assert data["model"] == str(tmp_path / "counter.model")
    assert data["params"] == {"bin": f"{PROGS}/counter", "flags": ""}


def test_json_report_of_a_violation(tmp_path):
    model = counter(tmp_path, DROP + "eventually all_counted: node[0].count == 2\n")
    r, data = report(tmp_path, "--trace-out", "t.json", model=model)
    assert r.returncode == 1
    assert data["verdict"] == "violated" and data["exit_status"] == 1
    assert data["property"] == {"kind": "eventually", "name": "all_counted"}
    assert data["message"] == "Error: Temporal property all_counted was violated."
    assert [s["action"] for s in data["trace"]] == [
        None, "DROP a -> counter", "DELIVER b -> counter CONNECT",
        'DELIVER b -> counter "y\\n"']
    assert data["trace"][1]["key"][0] == "DROP"
    world = data["trace"][-1]["world"]
    assert world["nodes"] == ["counter"] and world["node"] == [{"count": 1}]
    assert world["network"] == [] and world["replies"] == []
    assert data["fair_suffix_from"] == 2 and data["fair_ending"] == "stopped"
    assert data["trace_file"] == "t.json"


def test_json_report_of_a_simulation(tmp_path):
    r, data = report(tmp_path, "--simulate", "--seed", "3", "--walks", "2")
    assert r.returncode == 0
    assert data["mode"] == "simulate"
    assert data["simulation"] == {"seed": 3, "walks": 2, "walks_done": 2,
                                  "failing_walk": None, "failing_walk_seed": None,
                                  "walk_states": None, "swarm": None}
    r, data = report(tmp_path, "--simulate", "--swarm", "--seed", "3", "--walks", "2")
    assert r.returncode == 0 and data["simulation"]["swarm"] is None   # nothing was found
    assert "walks" not in data


def test_seconds_hands_the_time_left_to_swarm_walks(tmp_path):
    """--seconds on a search that ends in time: no walk (nothing is left); the JSON
    report has no `walks`. One that does not (here at once): the walks from its
    frontier take the second half, seeded by --seed, and the verdict says how many."""
    r, data = report(tmp_path, "--seconds", "60", "--seed", "7")
    assert r.returncode == 0 and data["stopped"] is None and "walks" not in data
    path = tmp_path / "durlog.json"          # durlog: 2983 states, not in 1.5 s
    r = run_cmc("--model-file", MODELS / "durlog.model", "--seconds", "3", "--seed", "7",
                "--json", path, cwd=tmp_path)
    data = json.loads(path.read_text())
    assert r.returncode == 0, r.stdout + r.stderr
    assert data["stopped"]["why"] == "--seconds 3"
    walks = data["walks"]
    assert walks["seed"] == 7 and walks["failing_walk"] is None
    if walks["walks_done"]:
        n = walks["walks_done"]
        assert f"Then {n} swarm walk{'s' if n > 1 else ''} from its frontier (seed" in r.stdout


@pytest.mark.parametrize("args, status, kind, message", [
    (["--max-states", "2"], 3, "engine", "state cap exceeded"),
    (["-D", "nope=1"], 2, "model", "-D nope: the model has no param nope"),
    (["--dfs", "0"], 2, "usage", "cmc: argument --dfs: must be at least 1, got 0"),
])
def test_json_report_of_an_error(tmp_path, args, status, kind, message):
    r, data = report(tmp_path, *args)
    assert r.returncode == status
    assert data["verdict"] == "error" and data["exit_status"] == status
    assert data["error"]["kind"] == kind and message in data["error"]["message"]
    assert data["counts"] is None


# -- docs/errors.md: every example gives its message --------------------------------------------

CODE = re.compile(r"`([^`]+)`")


def documented_errors():
    """(exit, message, model text, argv) for every row of docs/errors.md whose example is
    runnable (a model in a code span, lines joined by ⏎; optionally a command)."""
    rows = []
    in_examples = False
    for line in (ROOT / "docs" / "errors.md").read_text().splitlines():
        if line.startswith("| exit |"):
            in_examples = line.rstrip().endswith("| example |")
            continue
        if not (in_examples and re.match(r"\| \d+ \|", line)):
            continue
        status, message, example = (cell.strip() for cell in line.strip(" |").split(" | "))
        spans = CODE.findall(example)
        if not spans:
            continue
        model, command = spans[0], (spans[1] if len(spans) > 1 else "cmc --model-file m.model")
        text = "\n".join(model.split(" ⏎ ")).replace('"test/progs/', f'"{ROOT}/test/progs/')
        rows.append((int(status), CODE.findall(message)[0], text + "\n",
                     shlex.split(command)[1:]))
    return rows


def test_every_documented_error(tmp_path, monkeypatch):
    from cmc.cli import main
    rows = documented_errors()
    assert len(rows) > 70
    monkeypatch.chdir(tmp_path)
    handler = signal.getsignal(signal.SIGTERM)
    try:
        for status, message, text, argv in rows:
            (tmp_path / "m.model").write_text(text)
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                got = main(argv)
            printed = err.getvalue() + out.getvalue()
            assert (got, message in printed) == (status, True), (text, argv, printed)
            assert "Traceback" not in printed
    finally:
        signal.signal(signal.SIGTERM, handler)


def test_an_interrupt_inside_a_cleanup_is_still_an_interrupt(tmp_path, monkeypatch):
    """A Ctrl-C landing in shutil.rmtree's own cleanup comes out as OSError(EBADF)
    raised while the KeyboardInterrupt was handled (seen in CI): still exit 130,
    no traceback."""
    import cmc.cli as cli

    def interrupted_in_rmtree(args, run):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise OSError(9, "Bad file descriptor")
    monkeypatch.setattr(cli, "check", interrupted_in_rmtree)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.model").write_text("node a: true\n")
    handler = signal.getsignal(signal.SIGTERM)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            got = cli.main(["--model-file", "m.model"])
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert got == 130
    assert "interrupted" in err.getvalue() and "Traceback" not in err.getvalue()

    def plain_oserror(args, run):
        raise OSError(9, "Bad file descriptor")
    monkeypatch.setattr(cli, "check", plain_oserror)
    try:
        with pytest.raises(OSError):
            cli.main(["--model-file", "m.model"])
    finally:
        signal.signal(signal.SIGTERM, handler)
    # an error that escapes gives the caller its signal mask back (the tests that
    # follow start programs that must see Ctrl-C and SIGTERM)
    assert not signal.pthread_sigmask(signal.SIG_BLOCK, []) & {signal.SIGINT, signal.SIGTERM}


def test_model_dir_names_a_script_beside_the_model(tmp_path):
    """{model_dir} is the model file's folder, absolute (docs/model-file.md,
    `node NAME = "COMMAND"`), whatever the working directory (one with a space in its
    name stays one word), with the same search as the model that names the script by a
    relative path."""
    import os
    import shutil
    import sys
    folder = tmp_path / "my models"
    folder.mkdir()
    shutil.copy(ROOT / "test" / "progs" / "pynode.py", folder / "pynode.py")
    text = (ROOT / "test" / "models" / "pynode.model").read_text()
    assert text.count('"../progs/pynode.py ') == 2
    (folder / "m.model").write_text(text.replace('"../progs/pynode.py ',
                                                 '"{model_dir}/pynode.py '))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    beside = run_cmc("--model-file", folder / "m.model", "--max-depth", "5",
                     cwd=elsewhere, env=env)
    relative = run_cmc("--model-file", ROOT / "test" / "models" / "pynode.model",
                       "--max-depth", "5", cwd=elsewhere, env=env)
    # five states deep: the witness is not reached yet (exit 1), the same both ways
    assert beside.returncode == relative.returncode == 1, beside.stdout[-3000:] + beside.stderr
    assert "Error: Witness all_answered was never reached." in beside.stdout
    assert counts(beside.stdout) == counts(relative.stdout) == (33, 20, 5)


# -- a search that stops part way says how far it got ------------------------------------------

def test_seconds_stops_a_search_and_says_what_it_proved(tmp_path):
    """--seconds: a search whose time is up (here at once, after the launch) is not an
    error: exit 0, what was checked, and the same in the JSON report."""
    r = cmc(tmp_path, counter(tmp_path), "--seconds", "0.001", "--json", tmp_path / "r.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Model checking stopped (--seconds 0.001). No error has been found in the " \
           "worlds checked.\n" in r.stdout
    assert "The search stopped (--seconds 0.001): every world to depth 1 was checked, and 0 " \
           "of the 1 worlds at depth 1 (0%) were expanded toward depth 2.\n" \
           "Distinct states per depth: 1: 1.\n" in r.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["verdict"] == "ok" and data["bounded"] is True
    assert data["stopped"] == {"why": "--seconds 0.001", "complete_depth": 1,
                               "expanded_at_complete_depth": 0,
                               "worlds_at_complete_depth": 1, "per_depth": [1]}
    r = run_cmc("--model-file", counter(tmp_path), "--seconds", "5", "--dfs", "3")
    assert r.returncode == 2 and "--seconds bounds a breadth-first search" in r.stderr


def test_a_state_cap_says_what_was_proved_before_it(tmp_path):
    r = cmc(tmp_path, counter(tmp_path), "--max-states", "5", "--json", tmp_path / "r.json")
    assert r.returncode == 3, r.stdout + r.stderr
    assert r.stdout.endswith(
        "Error: state cap exceeded: more than 5 distinct states (--max-states); raise the "
        "cap or lower the budgets\n"
        "The search stopped (at the error above): every world to depth 2 was checked, and 1 "
        "of the 2 worlds at depth 2 (50%) were expanded toward depth 3.\n"
        "Distinct states per depth: 1: 1, 2: 2, 3: 3.\n")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["verdict"] == "error" and data["stopped"]["complete_depth"] == 2
