"""Habits a change keeps (docs/design.md, "How the code is written"): a commit's subject
says what changed in at most 72 characters, the why and the figures in its body. Checked
on the history since the rule was made (RULE_FROM); a checkout without that history
(an sdist, a shallow clone) has nothing to check."""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
RULE_FROM = "e77dbe2"          # the last commit made before the rule
SUBJECT_MAX = 72


def subjects() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    known = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "-q", "--verify",
                            f"{RULE_FROM}^{{commit}}"], capture_output=True)
    if known.returncode != 0:
        pytest.skip(f"the history from {RULE_FROM} is not in this checkout")
    out = subprocess.run(["git", "-C", str(ROOT), "log", "--format=%s",
                          f"{RULE_FROM}..HEAD"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_commit_subjects_are_at_most_72_characters():
    long = [s for s in subjects() if len(s) > SUBJECT_MAX]
    assert long == []
