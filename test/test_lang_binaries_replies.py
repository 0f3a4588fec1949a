"""What the language gives the kernel: the node binaries checked before a launch, and a
reply line turned into a record by the reply regex.

Fast: no process is started. Model files are written to tmp_path.
"""
from __future__ import annotations

import stat

import pytest

from cmc.errors import ModelError
from cmc.lang import check_binaries, reply_record
from langutil import assert_at, load

# --- for the kernel: binaries and reply records ---------------------------------------------

def test_check_binaries(tmp_path):
    program = tmp_path / "bin" / "n"
    model = load(tmp_path, 'node a = "/bin/sh"\nnode b = "sh -c x"\nnode c = "./bin/n 1"\n')
    with pytest.raises(ModelError) as info:
        check_binaries(model)
    assert_at(info.value, 3, 10, f"node c: binary not found: {program} (run the build, or "
                                 "fix the path)")
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    with pytest.raises(ModelError) as info:
        check_binaries(model)
    assert_at(info.value, 3, 10, f"node c: binary is not executable: {program} (chmod +x it, "
                                 "or fix the path)")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    check_binaries(model)


def test_check_binaries_program_not_on_path(tmp_path):
    model = load(tmp_path, 'node a = "/bin/sh"\nnode b = "no-such-program-cmc"\n')
    with pytest.raises(ModelError) as info:
        check_binaries(model)
    assert_at(info.value, 2, 10, "node b: binary not found: no-such-program-cmc (run the "
                                 "build, or fix the path)")


def test_reply_record(tmp_path):
    model = load(tmp_path, 'node a = "/x"\nreply /(?P<verb>[A-Z]+) (?P<n>\\S+)( (?P<opt>.*))?/\n')
    base = {"client": "c", "node": 1, "index": 4, "req": "PUT 7"}
    assert reply_record(model.reply, "c", 1, 4, "PUT 7", "ACK 7") == \
        dict(base, raw="ACK 7", verb="ACK", n=7, opt=None)
    assert reply_record(model.reply, "c", 1, 4, "PUT 7", "ACK -12 x") == \
        dict(base, raw="ACK -12 x", verb="ACK", n=-12, opt="x")
    assert reply_record(model.reply, "c", 1, 4, "PUT 7", "ACK 1.5 9") == \
        dict(base, raw="ACK 1.5 9", verb="ACK", n="1.5", opt=9)
    assert reply_record(model.reply, "c", 1, 4, "PUT 7", "ACK 007") == \
        dict(base, raw="ACK 007", verb="ACK", n=7, opt=None)
    # a full match is required: a line that only starts right has just the five fields
    assert reply_record(model.reply, "c", 1, 4, "PUT 7", "nope") == dict(base, raw="nope")
    assert reply_record(None, "c", 1, 4, "PUT 7", "ACK 7") == dict(base, raw="ACK 7")


def test_reply_regex_needs_a_full_match(tmp_path):
    model = load(tmp_path, 'node a = "/x"\nreply /ACK (?P<v>\\d+)/\n')
    assert "v" not in reply_record(model.reply, "c", 0, 0, "x", "ACK 7 more")
    assert reply_record(model.reply, "c", 0, 0, "x", "ACK 7")["v"] == 7
