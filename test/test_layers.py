"""The architecture of STYLE.md: imports flow one way; the engine imports none of
the other rooms; the language knows nothing of Linux; only _native touches cffi."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "cmc"


def imports_of(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    pkg = path.relative_to(ROOT.parent).with_suffix("").parts[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(pkg[:len(pkg) - node.level + 1])
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            found.add(mod)
    return found


def room_imports(room: str) -> set[str]:
    out = set()
    for path in (ROOT / room).rglob("*.py"):
        out |= {m for m in imports_of(path) if m.startswith("cmc")}
    return out


def test_engine_imports_no_other_room():
    bad = {m for m in room_imports("engine") if not m.startswith("cmc.engine")}
    assert bad == set()


def test_lang_knows_nothing_of_linux_or_search():
    bad = {m for m in room_imports("lang") if not (m.startswith("cmc.lang") or m == "cmc.errors")}
    assert bad == set()


def test_kernel_does_not_import_engine_lang_or_report():
    bad = {m for m in room_imports("kernel")
           if m.startswith(("cmc.engine", "cmc.lang", "cmc.report", "cmc.cli"))}
    assert bad == set()


def test_only_native_touches_cffi():
    users = [p.name for p in (ROOT / "kernel").rglob("*.py") if "_cmc_helper" in p.read_text()]
    assert users == ["_native.py"]
