"""Every demo under `time virtual` (issue 31, acceptance 2): models/virtual/NAME.model is
models/NAME.model with the line `time virtual` (latency 0, horizon 60 s) and its paths
made relative to models/virtual/, for each demo whose model has no `time` line of its
own. Each is run from the repository root on the correct build, with the verdict and
exact counts of docs/demos.md, "Every demo under `time virtual`"; and each file is
checked to be its demo's model, statement for statement, but for those lines."""
from __future__ import annotations

import re

import pytest

from conftest import MODELS, ROOT, counts, run_cmc

VIRTUAL = MODELS / "virtual"
BUILD = ROOT / "demo" / "build"

# demo: (the verdict's line, or None when every property holds; generated, distinct, depth)
CORRECT = {
    "appendkv": (None, 73, 61, 9),
    "bgsave": (None, 147, 137, 10),
    "durlog": (None, 2470, 1248, 14),
    "durlog-wrap": (None, 2470, 1248, 14),
    "gogossip": (None, 631, 308, 12),
    "gokv": (None, 502, 307, 13),
    "lease": (None, 31, 23, 10),
    "pbkv": (None, 123, 91, 12),
    "prefork": (None, 19, 19, 5),
    "raft": (None, 1043, 513, 16),
    "reclog": (None, 105, 88, 9),
    # with latency 0 no timer fires while the writer's SET is on the wire (docs/demos.md)
    "register": ("Error: Witness pending_write_lost was never reached.", 115, 83, 10),
    "relay": (None, 997, 507, 17),
    "swapstate": (None, 105, 95, 8),
    "tlog": (None, 4123, 2233, 14),
    "twopc": (None, 651, 405, 19),
}
SLOW = {"durlog-wrap", "gogossip", "tlog"}      # over ~10 s each on two shared cores
GO = {"gogossip", "gokv"}                        # built only where Go is installed


def cases() -> list:
    params = []
    for name in sorted(CORRECT):
        marks = []
        if name in SLOW:
            marks.append(pytest.mark.slow)
        if name in GO:
            marks.append(pytest.mark.skipif(not (BUILD / name).exists(),
                                            reason=f"Go is not installed (demo/{name} not built)"))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.mark.parametrize("name", cases())
def test_correct_build(name, tmp_path):
    verdict, *expected = CORRECT[name]
    r = run_cmc("--model-file", f"models/virtual/{name}.model", "--max-memory", "3G",
                "--trace-out", tmp_path / "trace.json", cwd=ROOT)
    if verdict is None:
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
        assert "Model checking completed. No error has been found.\n" in r.stdout
    else:
        assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-2000:]
        assert f"\n{verdict}\n" in r.stdout, r.stdout[-3000:]
    assert counts(r.stdout) == tuple(expected)


def statements(text: str) -> list[str]:
    """The lines of a model file without its comments and blank lines."""
    out = []
    for line in text.splitlines():
        quoted, cut = False, len(line)
        for i, c in enumerate(line):
            if c == '"' and (i == 0 or line[i - 1] != "\\"):
                quoted = not quoted
            elif c == "#" and not quoted:
                cut = i
                break
        line = line[:cut].rstrip()
        if line:
            out.append(line)
    return out


def test_one_virtual_model_per_demo_without_time():
    """A demo model (one with `param bin`) that does not say its time has a virtual one."""
    demos = {p.stem for p in MODELS.glob("*.model")
             if "param bin" in p.read_text() and not re.search(r"^time ", p.read_text(), re.M)}
    assert {p.stem for p in VIRTUAL.glob("*.model")} == demos == set(CORRECT)


@pytest.mark.parametrize("name", sorted(CORRECT))
def test_the_demo_model_with_time_virtual(name):
    virtual = statements((VIRTUAL / f"{name}.model").read_text())
    assert virtual.count("time virtual") == 1
    virtual.remove("time virtual")
    back = [re.sub(r'(?<=[" ])\.\./\.\./demo', "../demo", line)
            .replace("{model_dir}/{bin}", "{bin}") for line in virtual]
    assert back == statements((MODELS / f"{name}.model").read_text())
