"""The shape of the codebase, checked: every page script has the one skeleton of the README.

A page script is a docstring, imports, constants (UPPER_CASE names), functions, a `page()` function that draws the
page, and, last, `pages.show(page)`, which runs it inside the frame (ui/pages.py). Nothing else runs at import:
module globals outlive the run through fragments and callbacks, so a page keeps its tensors in function locals.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ui import pages

ROOT = Path(__file__).resolve().parents[1]
RUN_PAGE = "pages.show(page)"  # the last statement of every page script: ui.pages.show draws it in the frame


def constant(node: ast.stmt) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    names = [n for t in targets for n in (t.elts if isinstance(t, ast.Tuple) else [t])]
    return bool(names) and all(isinstance(n, ast.Name) and n.id.isupper() for n in names)


@pytest.mark.parametrize("entry", pages.PAGES, ids=[entry.path for entry in pages.PAGES])
def test_every_page_script_has_the_one_skeleton(entry):
    tree = ast.parse((ROOT / entry.file).read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), "a page script starts with a docstring: its title and what it shows"
    *body, last = tree.body[1:]
    strays = [f"line {node.lineno}: {ast.unparse(node)[:60]}" for node in body
              if not isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)) and not constant(node)]
    assert not strays, f"code that runs at import, outside page(): {strays}"
    page = [node for node in body if isinstance(node, ast.FunctionDef) and node.name == "page"]
    assert len(page) == 1 and not page[0].args.args and ast.unparse(page[0].returns) == "None", "one `def page() -> None`"
    assert ast.get_docstring(page[0]), "page() says what the page draws"
    assert ast.unparse(last) == RUN_PAGE, f"the script ends with {RUN_PAGE}"
