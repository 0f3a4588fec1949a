"""The JVM under cmc (issue 49): a Java echo server, compiled here with `javac`, checked
unmodified under `time virtual`, its worlds copied (threads, the JDK's own descriptors)
with the same output as a replay of every world from launch; and the Java demo, a
replicated register (demo/jregister), whose planted bug is caught. Skipped, saying so,
where no JDK is installed (Debian: default-jdk-headless; .ci/run installs it)."""
from __future__ import annotations

import shutil
import json
import subprocess

import pytest

from conftest import MODELS, ROOT, TEST_MODELS, counts, run_cmc
from test_fast import both_ways

JAVAC = shutil.which("javac")
pytestmark = pytest.mark.skipif(JAVAC is None or shutil.which("java") is None,
                                reason="no JDK (Debian default-jdk-headless)")
BUILD = ROOT / "test" / "java" / "build"


@pytest.fixture(scope="module")
def classes():
    BUILD.mkdir(exist_ok=True)
    # javac is a JVM run natively: no perf-data file of its own in the host's /tmp
    subprocess.run([JAVAC, "-J-XX:-UsePerfData", "-d", str(BUILD),
                    str(ROOT / "test" / "java" / "Echo.java")], check=True, timeout=120)
    return BUILD


def test_a_java_echo_server_is_copied_as_replayed(classes, tmp_path):
    rc, out, fast = both_ways(TEST_MODELS / "java_echo.model", tmp_path, "--max-memory", "3G",
                              fast_args=())
    assert rc == 0, out[-2000:]
    assert "Model checking completed. No error has been found." in out
    assert counts(out) == (19, 19, 5)
    assert fast["copies"] > 0 and fast["replayed"] == {}, (fast["copies"], fast["replayed"])


@pytest.fixture(scope="module")
def jregister():
    subprocess.run(["make", "-s", "-C", str(ROOT / "demo"), "build/jregister/.built",
                    "build/jregister-bug/.built"], check=True, timeout=300)


def test_the_java_register_holds_copied(jregister, tmp_path):
    """The correct build: every world copied (the JVMs forked, none replayed), the
    counts docs/demos.md gives (the same replayed: the bug gate's --no-fast run)."""
    report = tmp_path / "r.json"
    p = run_cmc("--model-file", MODELS / "jregister.model", "--max-memory", "3G", "--strict",
                "--json", report)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert counts(p.stdout) == (121, 94, 9)
    data = json.loads(report.read_text())
    assert data["copies"] > 0 and data["replayed"] == {}, (data["copies"], data["replayed"])


def test_the_java_register_bug_is_a_stale_read_at_the_backup(jregister, tmp_path):
    trace = tmp_path / "t.json"
    p = run_cmc("--model-file", MODELS / "jregister.model", "--max-memory", "3G",
                "-D", "bin=../demo/build/jregister-bug", "--trace-out", trace)
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert "Error: Linearizability property register_is_linearizable is violated." in p.stdout
    assert counts(p.stdout) == (72, 52, 7)
    actions = json.loads(trace.read_text())["actions"]
    assert len(actions) + 1 == 7
    # the OK reached the writer (State 5), and then the reader's GET was answered EMPTY
    assert '* reader  read   -    null   "GET"    "EMPTY"  state 6     state 7' in p.stdout
