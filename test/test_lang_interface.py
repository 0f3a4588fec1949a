"""What cmc.lang imports (nothing of cmc but the errors) and what it exports.
"""
from __future__ import annotations

import ast as python_ast
import pathlib
import sys

from cmc.lang import Model, Property

# --- the layering rule ---------------------------------------------------------------------

def test_lang_imports_nothing_of_cmc_but_errors():
    package = pathlib.Path(__file__).resolve().parent.parent / "cmc" / "lang"
    for source in package.glob("*.py"):
        tree = python_ast.parse(source.read_text(), str(source))
        for node in python_ast.walk(tree):
            if isinstance(node, python_ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, python_ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name == "cmc" or name.startswith("cmc."):
                    assert name == "cmc.errors" or name.startswith("cmc.lang"), \
                        f"{source.name} imports {name}"


def test_public_interface():
    import cmc.lang
    for name in ("load_model", "check_property", "evaluate", "Model", "Property",
                 "check_binaries", "reply_record", "Loc", "NodeDecl", "ClientDecl",
                 "BuildDecl", "ReplyDecl"):
        assert hasattr(cmc.lang, name)
    assert Property.__dataclass_params__.frozen and Model.__dataclass_params__.frozen
    assert sys.modules["cmc.lang"] is cmc.lang
