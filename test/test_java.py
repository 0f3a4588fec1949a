"""The JVM under cmc (issue 49): a Java echo server, compiled here with `javac`, checked
unmodified under `time virtual`, its worlds copied (threads, the JDK's own descriptors)
with the same output as a replay of every world from launch. Skipped, saying so, where
no JDK is installed (Debian: default-jdk-headless; .ci/run installs it)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import ROOT, TEST_MODELS, counts
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
