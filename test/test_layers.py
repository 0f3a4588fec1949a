"""The architecture of docs/design.md ("The rooms") as an allow-list: for every module of cmc/, the cmc
modules and third-party packages it may import, checked on the source (static imports,
relative ones resolved, and dynamic imports by `importlib.import_module` or
`__import__`). The check takes the tree's root, so a test can plant a violation in a
copy of cmc/ and see it caught."""
from __future__ import annotations

import ast
import pathlib
import shutil
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

# A unit is a room (every module under cmc/ROOM/, and under cmc/kernel/ROOM/ for the
# kernel's rooms) or a top-level module ("cmc" is the package's __init__: the version;
# cmc.kernel.cluster, the kernel's face). Each may import the units named here, or exactly
# the modules named here. Imports flow one way: cli -> check -> (adapter, engine, lang,
# report); the adapter is the one seam, the only translator between the rooms (the
# language's model to the kernel's cluster spec and the engine's properties); the
# engine, the language and the kernel import only themselves and the error hierarchy.
MAY_IMPORT = {
    "cmc": set(),
    "cmc.__main__": {"cmc.cli"},
    # argparse and exit statuses; a property's evaluation error shows its world(s)
    "cmc.cli": {"cmc", "cmc.errors", "cmc.check", "cmc.adapter", "cmc.report",
                "cmc.scratch", "cmc.interrupts", "cmc.resources", "cmc.argparsing",
                "cmc.maelstrom_cmd"},
    # cmc maelstrom: a workload's model written, and the arguments that check it
    "cmc.maelstrom_cmd": {"cmc.argparsing", "cmc.check"},
    "cmc.argparsing": {"cmc.errors"},   # the command line's parser and value types
    # one run, wired: load, search or replay, report
    "cmc.check": {"cmc", "cmc.errors", "cmc.adapter", "cmc.engine", "cmc.lang", "cmc.report",
                  "cmc.scratch", "cmc.interrupts", "cmc.machines", "cmc.resources",
                  "cmc.coverage"},
    # what a search took and reached, and what never happened (vacuity): the engine's
    # observer over the kernel's views, read with the language's model
    "cmc.coverage": {"cmc.engine", "cmc.lang"},
    # --ray: what each machine must have, checked there (its version, files, scratch)
    "cmc.machines": {"cmc", "cmc.scratch"},
    "cmc.errors": set(),
    "cmc.interrupts": set(),            # Ctrl-C and SIGTERM held (any unit may)
    "cmc.scratch": {"cmc.errors", "cmc.interrupts"},   # the run's scratch directory
    "cmc.resources": {"cmc.errors"},    # --max-memory: the run's memory and scratch, watched
    # the kernel is seen through its face (a world of nodes) and the copying errors
    "cmc.adapter": {"cmc.errors", "cmc.engine", "cmc.lang", "cmc.kernel.cluster",
                    "cmc.kernel.maelstrom", "cmc.kernel.proc.fork"},
    "cmc.engine": {"cmc.engine", "cmc.errors"},
    "cmc.lang": {"cmc.lang", "cmc.errors"},
    # The kernel by role, bottom-up: each room stands on those below it, never above.
    # linux: the ABI, the filter, the C helper, /proc; world: what a world holds (network,
    # disk, clients, actions); calls: the handlers; proc: running and copying a node's
    # processes; cluster: the world of nodes the adapter drives.
    "cmc.kernel": set(),
    "cmc.kernel.linux": {"cmc.kernel.linux", "cmc.kernel._cmc_helper"},
    "cmc.kernel.world": {"cmc.kernel.world", "cmc.kernel.linux", "cmc.errors"},
    "cmc.kernel.calls": {"cmc.kernel.calls", "cmc.kernel.world", "cmc.kernel.linux",
                         "cmc.errors"},
    "cmc.kernel.proc": {"cmc.kernel.proc", "cmc.kernel.calls", "cmc.kernel.world",
                        "cmc.kernel.linux", "cmc.errors", "cmc.interrupts"},
    "cmc.kernel.cluster": {"cmc.kernel.proc", "cmc.kernel.calls", "cmc.kernel.world",
                           "cmc.kernel.linux", "cmc.errors", "cmc.interrupts"},
    # a cluster some of whose nodes speak Maelstrom's protocol: the kernel's other face
    "cmc.kernel.maelstrom": {"cmc.kernel.cluster", "cmc.kernel.world", "cmc.errors"},
    # a reporter renders what the engine emits (Outcome, Stats, Step: the engine's
    # protocol module), and the JSON report carries cmc's version
    "cmc.report": {"cmc.report", "cmc.errors", "cmc", "cmc.engine.model"},
}

# Packages (and cmc's compiled helper) that only some units or modules may import. A
# third-party package missing here is an error: say where it belongs.
ONLY_IN = {
    "cffi": {"cmc.kernel.linux._native"},        # and csrc/build_helper.py, outside cmc/
    "cmc.kernel._cmc_helper": {"cmc.kernel.linux._native"},
    "ptrace": {"cmc.kernel.calls.calllog"},      # python-ptrace's syscall prototypes
    "xxhash": {"cmc.kernel.world", "cmc.kernel.cluster"},   # digests of files and worlds
    "lark": {"cmc.lang"},
    "rich": {"cmc.report"},
    "ray": {"cmc.engine.rayworkers"},            # optional: --ray (pip install 'cmc[ray]')
}


def module_name(root: pathlib.Path, path: pathlib.Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of(module: str) -> str:
    """cmc.engine.bfs -> cmc.engine; cmc.cli -> cmc.cli; cmc -> cmc; in the kernel,
    one level down: cmc.kernel.world.net -> cmc.kernel.world, cmc.kernel.cluster."""
    parts = module.split(".")
    return ".".join(parts[:3] if parts[:2] == ["cmc", "kernel"] else parts[:2])


def is_module(root: pathlib.Path, module: str) -> bool:
    """Whether `module` is a module or package of the tree (a compiled one too)."""
    path = root.joinpath(*module.split("."))
    return (path.with_suffix(".py").is_file() or path.is_dir()
            or any(path.parent.glob(path.name + ".*.so")))


def dynamic_target(call: ast.Call) -> str | None:
    """The module a dynamic import names; "" when the name is computed (unverifiable)."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in ("import_module", "__import__"):
        return None
    if not call.args or not (isinstance(call.args[0], ast.Constant)
                             and isinstance(call.args[0].value, str)):
        return ""
    target = call.args[0].value
    if target.startswith("."):                   # import_module(".x", package)
        anchor = call.args[1] if len(call.args) > 1 else next(
            (k.value for k in call.keywords if k.arg == "package"), None)
        if not (isinstance(anchor, ast.Constant) and isinstance(anchor.value, str)):
            return ""
        level = len(target) - len(target.lstrip("."))
        base = anchor.value.split(".")[:len(anchor.value.split(".")) - level + 1]
        target = ".".join(base + [target.lstrip(".")]).rstrip(".")
    return target


def imports_of(root: pathlib.Path, path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, module) for every import in the file; `from P import n` counts as P.n
    when P.n is a module of the tree."""
    module = module_name(root, path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                mod = ".".join(filter(None, [base, node.module]))
            else:
                mod = node.module
            if mod == "__future__":
                continue
            for a in node.names:
                sub = f"{mod}.{a.name}"
                found.append((node.lineno, sub if is_module(root, sub) else mod))
        elif isinstance(node, ast.Call):
            target = dynamic_target(node)
            if target is not None:
                found.append((node.lineno, target))
    return found


def violations(root: pathlib.Path) -> list[str]:
    """Every import under root/cmc/ that the allow-lists do not permit."""
    stdlib = sys.stdlib_module_names
    bad = []
    for path in sorted((root / "cmc").rglob("*.py")):
        module = module_name(root, path)
        unit = unit_of(module)
        where = path.relative_to(root)
        if unit not in MAY_IMPORT:
            bad.append(f"{where}: {unit} has no entry in MAY_IMPORT")
            continue
        for line, imported in imports_of(root, path):
            if imported == "":
                bad.append(f"{where}:{line}: a dynamic import of a computed name")
                continue
            top = imported.split(".")[0]
            limit = next((v for k, v in ONLY_IN.items()
                          if imported == k or imported.startswith(k + ".")), None)
            if limit is not None and not (module in limit or unit in limit):
                bad.append(f"{where}:{line}: {imported} only in {sorted(limit)}")
            elif top == "cmc":
                allowed = MAY_IMPORT[unit]
                if not (imported in allowed or unit_of(imported) in allowed):
                    bad.append(f"{where}:{line}: {unit} may not import {imported} "
                               f"(only {sorted(allowed)})")
            elif limit is None and top not in stdlib:
                bad.append(f"{where}:{line}: third-party {top} has no entry in ONLY_IN")
    return bad


def test_every_import_follows_the_rooms():
    assert violations(ROOT) == []


def test_the_check_sees_the_imports_it_allows():
    """Not vacuous: the edges the allow-lists exist for are found in today's code."""
    seen = {(unit_of(module_name(ROOT, p)), m)
            for p in (ROOT / "cmc").rglob("*.py") for _, m in imports_of(ROOT, p)}
    for edge in [("cmc.kernel.linux", "cmc.kernel._cmc_helper"),
                 ("cmc.report", "cmc.engine.model"),
                 ("cmc.report", "cmc"), ("cmc.adapter", "cmc.kernel.cluster"),
                 ("cmc.adapter", "cmc.lang"), ("cmc.check", "cmc.adapter"),
                 ("cmc.kernel.world", "cmc.errors"), ("cmc.lang", "lark"),
                 ("cmc.kernel.world", "xxhash"), ("cmc.kernel.world", "cmc.kernel.linux._native"),
                 ("cmc.kernel.calls", "cmc.kernel.world.net"),
                 ("cmc.kernel.proc", "cmc.kernel.calls.answer"),
                 ("cmc.kernel.cluster", "cmc.kernel.proc.node")]:
        assert edge in seen, edge


PLANTS = {
    "kernel-imports-adapter": ("cmc/kernel/world/net.py", "import cmc.adapter\n", "cmc.adapter"),
    "report-imports-kernel": ("cmc/report/tlc.py", "from ..kernel import cluster\n",
                              "cmc.kernel.cluster"),
    "engine-imports-kernel-dynamically": (
        "cmc/engine/bfs.py", 'import importlib\nimportlib.import_module("cmc.kernel")\n',
        "cmc.kernel"),
    "cffi-outside-native": ("cmc/kernel/linux/sockaddr.py", "from cffi import FFI\n", "cffi"),
    "engine-imports-kernel-relatively": ("cmc/engine/search.py", "from .. import kernel\n",
                                         "cmc.kernel"),
    "lang-imports-report-by-dunder": ("cmc/lang/values.py", '__import__("cmc.report.tlc")\n',
                                      "cmc.report.tlc"),
    "rich-in-the-engine": ("cmc/engine/model.py", "from rich.text import Text\n", "rich.text"),
    "helper-outside-native": ("cmc/kernel/proc/fork.py", "from .._cmc_helper import lib\n",
                              "cmc.kernel._cmc_helper"),
    # the kernel's rooms: none reaches up
    "linux-imports-the-world": ("cmc/kernel/linux/abi.py", "from ..world import net\n",
                                "cmc.kernel.world.net"),
    "world-imports-a-handler": ("cmc/kernel/world/net.py", "from ..calls.answer import Ret\n",
                                "cmc.kernel.calls.answer"),
    "handler-imports-the-node": ("cmc/kernel/calls/stream.py",
                                 "from ..proc.node import Node\n", "cmc.kernel.proc.node"),
    "node-imports-the-cluster": ("cmc/kernel/proc/node.py", "from .. import cluster\n",
                                 "cmc.kernel.cluster"),
    "adapter-reaches-past-the-face": ("cmc/adapter.py", "from .kernel.world import net\n",
                                      "cmc.kernel.world.net"),
}


@pytest.mark.parametrize("plant", PLANTS.values(), ids=PLANTS.keys())
def test_a_planted_violation_is_caught(tmp_path, plant):
    target, line, imported = plant
    shutil.copytree(ROOT / "cmc", tmp_path / "cmc",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / target, "a") as f:
        f.write(line)
    lineno = len((tmp_path / target).read_text().splitlines())
    [found] = violations(tmp_path)          # the plant, and nothing else
    assert found.startswith(f"{target}:{lineno}: ") and f" {imported} " in found, found


def _looks_inside(tree: ast.AST) -> list[tuple[int, str]]:
    """Where code subscripts, or calls .get on, something named like a world's view or
    an action's key (view, view2, next_view, key, keys[i] ...)."""
    def named(node) -> str | None:
        while isinstance(node, ast.Subscript):       # keys[i][0]: look at keys
            node = node.value
        name = node.id if isinstance(node, ast.Name) else \
            node.attr if isinstance(node, ast.Attribute) else None
        return name if name and ("view" in name or name in ("key", "k")) else None
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and named(node.value):
            out.append((node.lineno, named(node.value)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get" and named(node.func.value)):
            out.append((node.lineno, named(node.func.value)))
    return out


def test_the_engine_never_looks_inside_a_world_or_a_key():
    """The engine knows neither the world's shape nor a key's: it asks the
    system (actions' kinds, parts) and hands views to properties and reporters."""
    bad = []
    for path in sorted((ROOT / "cmc" / "engine").glob("*.py")):
        for line, name in _looks_inside(ast.parse(path.read_text())):
            bad.append(f"{path.relative_to(ROOT)}:{line}: looks inside {name}")
    assert bad == []


def test_looking_inside_is_seen():
    planted = "def f(view, key):\n    return view['node'], key[0], view.get('x')\n"
    assert [n for _, n in _looks_inside(ast.parse(planted))] == ["view", "key", "view"]
