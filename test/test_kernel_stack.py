"""The kernel is a one-way stack of rooms: linux (ABI, filter, C helper, /proc) ->
world (network, disk, clients, actions) -> calls (the handlers, dispatch) -> proc
(node, scheduler, threads, copying) -> cluster -> maelstrom (a cluster of Maelstrom
nodes), with no import inside a function, no
cycle, and no module of cmc/ over 600 lines unless it is listed with why it is one idea
(docs/design.md, "How the code is written"). test_layers.py holds the rooms'
allow-lists."""
from __future__ import annotations

import ast
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
KERNEL = ROOT / "cmc" / "kernel"
ROOMS = ("linux", "world", "calls", "proc", "cluster", "maelstrom")       # bottom-up

spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
import_graph = importlib.util.module_from_spec(spec)
spec.loader.exec_module(import_graph)


def kernel_graph() -> dict[str, set[str]]:
    g = import_graph.graph()
    return {m.removeprefix("cmc.kernel."): {d.removeprefix("cmc.kernel.") for d in deps
                                            if d.startswith("cmc.kernel.") and d in g}
            for m, deps in g.items() if m.startswith("cmc.kernel.")}


def test_no_import_inside_a_function_in_the_kernel():
    found = []
    for path in sorted(KERNEL.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found += [f"{path.name}:{n.lineno}" for n in ast.walk(fn)
                          if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert found == []


def test_the_kernel_has_no_import_cycle():
    g = kernel_graph()
    order = import_graph.layered(g)          # each module imports only those before it
    assert sorted(order) == sorted(g)
    assert order[-1] == "maelstrom"             # a cluster of Maelstrom nodes, on top


def test_every_module_is_in_a_room_and_no_room_reaches_up():
    g = kernel_graph()
    rank = {room: i for i, room in enumerate(ROOMS)}
    up = []
    for m, deps in g.items():
        assert m.split(".")[0] in rank, f"{m} is in no room of the kernel"
        up += [f"{m} -> {d}" for d in deps if rank[d.split(".")[0]] > rank[m.split(".")[0]]]
    assert up == []
    assert {m.split(".")[0] for m in g} == set(ROOMS)      # not vacuous: every room used


# A module past LONG lines is a review trigger, not a wall: one that stays longer is
# listed here with why it is one idea (docs/design.md, "How the code is written").
LONG = 600
LONG_BUT_ONE_IDEA: dict[str, str] = {
    "cmc/kernel/proc/scheduler.py":
        "running a node's threads one at a time: the run loop, the choice of the next "
        "thread, the watchdog and what a blocked thread shows all read and write the "
        "loop's state (the thread table itself is tasks.py's)",
}


def long_modules() -> dict[str, int]:
    """The modules of cmc/ over LONG lines."""
    return {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "cmc").rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > LONG}


def test_a_module_over_600_lines_says_why_it_is_one_idea():
    """Every module over 600 lines is in LONG_BUT_ONE_IDEA with a reason, and every entry
    there is still over 600 lines (a stale entry goes once its module is cut)."""
    long = long_modules()
    unexplained = sorted(set(long) - set(LONG_BUT_ONE_IDEA))
    assert unexplained == [], (
        f"over {LONG} lines: {', '.join(f'{m} ({long[m]})' for m in unexplained)}: cut it in "
        "two, or list it in LONG_BUT_ONE_IDEA with why it is one idea")
    stale = sorted(set(LONG_BUT_ONE_IDEA) - set(long))
    assert stale == [], f"listed in LONG_BUT_ONE_IDEA but not over {LONG} lines: {stale}"
    assert all(why.strip() for why in LONG_BUT_ONE_IDEA.values())


def test_the_design_doc_shows_the_graph_the_code_has():
    """docs/design.md's import graph is the script's output, not drawn by hand."""
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        import_graph.main()
    assert f"```\n{out.getvalue()}```\n" in (ROOT / "docs" / "design.md").read_text()
