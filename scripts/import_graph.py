#!/usr/bin/env python3
"""The import graph of cmc, generated from the code (docs/design.md shows its output).

    python3 scripts/import_graph.py            # the rooms, then cmc/kernel module by module

Each line is `A -> B, C`: module or room A imports B and C (imports of cmc's own modules
only, static ones, at any depth of the file; the compiled helper is left out). The
kernel's rooms (linux, world, calls, proc, and cluster on top), then its modules, are
listed bottom-up: each imports only those listed before it.
"""
from __future__ import annotations

import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "cmc"


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: pathlib.Path) -> set[str]:
    """cmc modules imported by the file at path."""
    me = module_name(path).split(".")
    package = me if path.name == "__init__.py" else me[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:            # `from . import x` imports module x
                sub = f"{mod}.{a.name}"
                found.add(sub if (ROOT.parent / sub.replace(".", "/")).with_suffix(".py").exists()
                          else mod)
    return {m for m in found if m == "cmc" or m.startswith("cmc.")}


def room(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def is_package(module: str) -> bool:
    return ROOT.parent.joinpath(*module.split(".")).is_dir()


def kernel_room(module: str) -> str:
    """cmc.kernel.world.net -> world; cmc.kernel.cluster -> cluster."""
    return module.split(".")[2]


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in sorted(ROOT.rglob("*.py"))}


def layered(g: dict[str, set[str]]) -> list[str]:
    """The modules in an order where each imports only those before it."""
    done: list[str] = []
    left = dict(g)
    while left:
        ready = sorted(m for m, deps in left.items() if deps <= set(done) | {m})
        if not ready:
            raise SystemExit(f"import cycle among: {sorted(left)}")
        done += ready
        for m in ready:
            del left[m]
    return done


def main() -> None:
    g = graph()
    rooms: dict[str, set[str]] = {}
    for m, deps in g.items():
        rooms.setdefault(room(m), set()).update(room(d) for d in deps if room(d) != room(m))
    print("rooms:")
    for r in sorted(rooms):
        print(f"  {r} -> {', '.join(sorted(rooms[r])) or '(nothing)'}")
    kernel = {m: {d for d in deps if d.startswith("cmc.kernel.") and d in g}
              for m, deps in g.items() if m.startswith("cmc.kernel.") and not is_package(m)}
    kroom = {}
    for m, deps in kernel.items():
        kroom.setdefault(kernel_room(m), set()).update(
            kernel_room(d) for d in deps if kernel_room(d) != kernel_room(m))
    print("cmc/kernel's rooms, bottom-up:")
    for r in layered(kroom):
        print(f"  {r} -> {', '.join(sorted(kroom[r])) or '(nothing)'}")
    print("cmc/kernel, bottom-up:")
    for m in layered(kernel):
        deps = sorted(d.removeprefix("cmc.kernel.") for d in kernel[m])
        print(f"  {m.removeprefix('cmc.kernel.')} -> {', '.join(deps) or '(nothing)'}")


if __name__ == "__main__":
    sys.exit(main())
