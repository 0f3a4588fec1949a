"""One row per system call (cmc/kernel/linux/syscalls.py): what cmc makes of a call is
said once, and every module that acts on calls derives its sets from the rows. Checked
here, in-process and on the source: each call cmc may be notified of has one handler,
every row and every handler is used, no other module of the kernel keeps a list of
calls of its own, and the numbers the table reads are packaged with it."""
from __future__ import annotations

import ast
import pathlib
import tomllib

import pytest

from cmc.kernel.calls import dispatch
from cmc.kernel.linux import filter as seccomp
from cmc.kernel.linux.syscalls import ENOSYS, NR, ROW, ROWS, Row

ROOT = pathlib.Path(__file__).resolve().parent.parent
TABLE = ROOT / "cmc" / "kernel" / "linux" / "syscalls.py"


def notified(row: Row) -> bool:
    """Whether the filter may hand the call to cmc (with some options of the model)."""
    return row.notified not in (None, ENOSYS) or row.disk is not None


def test_every_notified_call_has_exactly_one_handler():
    assert len(ROW) == len(ROWS) == len({row.name for row in ROWS})     # one row a call
    assert [row.name for row in ROWS if notified(row) and row.handler is None] == []
    assert [row.name for row in ROWS if row.handler is not None and not notified(row)] == []
    assert set(dispatch.HANDLERS) == {row.nr for row in ROWS if notified(row)}


def defined_handlers() -> set[str]:
    """"module.sys_name" of every handler function the dispatch's modules define."""
    out = set()
    for name, module in dispatch.MODULES.items():
        tree = ast.parse(pathlib.Path(module.__file__).read_text())
        out |= {f"{name}.{fn.name}" for fn in tree.body
                if isinstance(fn, ast.FunctionDef) and fn.name.startswith("sys_")}
    return out


def test_every_row_and_every_handler_is_used():
    named = {row.handler for row in ROWS if row.handler is not None}
    defined = defined_handlers()
    assert named - defined == set()          # a row names a handler that is not there
    assert defined - named == set()          # a handler no row names
    for row in ROWS:
        if row.handler is not None:
            assert callable(dispatch.handler_of(row))
        # a row says something: the filter sees the call, or some module acts on it
        assert notified(row) or row.notified == ENOSYS or row != Row(row.name), row.name


def test_the_filter_places_every_call_on_a_descriptor():
    for disk in (False, True):
        for stdio in (False, True):
            assert seccomp.build_filter(disk=disk, stdio=stdio)


def spelled_calls(source: str) -> list[tuple[int, str]]:
    """Where a set, dict, tuple or list literal is a list of system calls: all its
    elements (a dict's keys) name calls, as strings or as NR["name"]; or it looks
    one up by NR["name"] among other things. A literal that merely holds a word that is
    also a call's name among others ("pipe", ends) is not one."""
    def names_a_call(e) -> bool:
        return (isinstance(e, ast.Constant) and e.value in NR) or looks_up(e)

    def looks_up(e) -> bool:
        return (isinstance(e, ast.Subscript) and isinstance(e.value, ast.Name)
                and e.value.id in ("NR", "NAME") and isinstance(e.slice, ast.Constant)
                and e.slice.value in NR)
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            elts = node.elts
        elif isinstance(node, ast.Dict):
            elts = [k for k in node.keys if k is not None]
            if any(looks_up(v) for v in node.values):
                out.append((node.lineno, ast.unparse(node)))
                continue
        else:
            continue
        if elts and (all(names_a_call(e) for e in elts) or any(looks_up(e) for e in elts)):
            out.append((node.lineno, ast.unparse(node)))
    return out


def test_no_module_of_the_kernel_keeps_a_list_of_calls():
    """The rows are the one place; the language's op kinds ("read", "write") and the
    like live outside the kernel, and inside it a word among others is no list."""
    found = []
    for path in sorted((ROOT / "cmc" / "kernel").rglob("*.py")):
        if path != TABLE:
            found += [f"{path.relative_to(ROOT)}:{line}: {text}"
                      for line, text in spelled_calls(path.read_text())]
    assert found == []


@pytest.mark.parametrize("source, found", [
    ('X = frozenset(NR[n] for n in ("read", "recvfrom"))', 1),
    ('X = {"ptrace": "traces", "setns": "enters"}', 1),
    ('X = {NR["open"]: 0, NR["openat"]: 1}', 1),
    ('if nr in (NR["wait4"], NR["waitid"]): pass', 1),
    ('X = [0, NR["clock_gettime"], 0]', 1),
    ('X = ("sendfile",)', 1),
    ('plan.append(("pipe", ends))', 0),
    ('MODES = ("fsync", "fsync partial", "strict")', 0),
    ('if kind not in ("read", "write", "cas"): pass', 0),
    ('if nr == NR["execve"]: pass', 0),
])
def test_a_list_of_calls_is_seen(source, found):
    assert len(spelled_calls(source)) == found


def test_one_file_of_cmc_names_recvfrom():
    """A call's name is spelled in its row: handlers are named by what they do, and
    messages take the name from the call's number; the numbers are not Python."""
    assert [str(p.relative_to(ROOT)) for p in sorted((ROOT / "cmc").rglob("*.py"))
            if "recvfrom" in p.read_text()] == ["cmc/kernel/linux/syscalls.py"]


def test_the_numbers_are_packaged():
    data = "syscalls_x86_64.txt"
    assert (TABLE.parent / data).is_file() and NR["recvfrom"] == 45
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "cmc.kernel.linux" in config["packages"]
    assert data in config["package-data"]["cmc.kernel.linux"]    # wheel and sdist alike
