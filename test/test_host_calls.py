"""Nothing a node does acts on the host (docs/target-contract.md, "Calls that would act
on the host"): each call of the policy table, made by a real program under the real
filter with arguments that would do nothing natively, stops the run with exit 3 naming
the node, the call and its arguments; a signal to the node's own child runs."""
from __future__ import annotations

import pytest

from conftest import PROGS, run_cmc

REFUSED = {
    "bpf": r"called bpf\(0x0, 0x0, 0x0, .*which loads programs or maps into the host's kernel",
    "perf_event_open": r"called perf_event_open\(.*which watches the host's CPUs",
    "userfaultfd": r"called userfaultfd\(.*which handles page faults outside cmc's sight",
    "mount": r"called mount\(.*which changes the host's mounts",
    "settimeofday": r"called settimeofday\(0x0, 0x0, .*which sets the host's clock",
    "clock_settime": r"called clock_settime\(0x0, 0x0, .*which sets the host's clock",
    "adjtimex": r"called adjtimex\(.*which reads or steers the host's clock",
    "sethostname": r"called sethostname\(.*which renames the host",
    "reboot": r"called reboot\(.*which restarts the host",
    "init_module": r"called init_module\(.*which loads a kernel module",
    "kexec_load": r"called kexec_load\(.*which loads a new kernel",
    "swapon": r"called swapon\(.*which changes the host's swap",
    "keyctl": r"called keyctl\(.*which uses the host's kernel keyrings",
    "syslog": r"called syslog\(0xa, .*which reads the host's kernel log",
    "kill_init": r"called kill\(0x1, 0x0, .*which signals process 1, which is not the node's",
    "kill_all": r"called kill\(0xffffffff, 0x0, .*which signals every process it may",
    "setpriority_user": r"called setpriority\(0x2, .*which changes the priority of every "
                        r"process of a user",
    "pidfd_open_init": r"called pidfd_open\(0x1, .*which acts on process 1, which is not "
                       r"the node's",
}


def run(tmp_path, call: str):
    path = tmp_path / "m.model"
    path.write_text(f'node h = "{PROGS}/hostcalls {call}"\ninvariant t: true\n')
    return run_cmc("--model-file", path, cwd=tmp_path)


@pytest.mark.parametrize("call", sorted(REFUSED))
def test_a_call_that_would_act_on_the_host_is_refused(tmp_path, call):
    import re
    r = run(tmp_path, call)
    assert r.returncode == 3, r.stdout + r.stderr
    error = r.stdout[r.stdout.find("Error: "):]
    assert error.startswith("Error: node h (step 0, launch): "), error
    assert re.search(REFUSED[call], error), error
    assert "(refused: nothing a node does acts on the host)" in error
    assert "Traceback" not in r.stdout + r.stderr


def test_a_signal_to_the_nodes_own_child_runs(tmp_path):
    """kill of a child the node forked (not seen yet by cmc: it made no call) is the
    node's business: the child dies of it and is reaped."""
    r = run(tmp_path, "kill_child")
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_policy_table_lists_every_call_cmc_refuses():
    """docs/target-contract.md's table names each call calls/host.py refuses or checks
    (the rows with a `host`, cmc/kernel/linux/syscalls.py)."""
    from cmc.kernel.linux.syscalls import ROWS
    from conftest import ROOT
    text = (ROOT / "docs" / "target-contract.md").read_text()
    table = text[text.index("## Calls that would act on the host"):]
    table = table[:table.index("\n## ", 3)]
    missing = [row.name for row in ROWS if row.host is not None and f"`{row.name}`" not in table]
    assert missing == []
