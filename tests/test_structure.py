"""The shape of the codebase, checked: the page skeleton, the layers of the import graph, and public seams.

- Every page script has the one skeleton of the README: a docstring, imports, constants (UPPER_CASE names),
  functions, a `page()` function that draws the page, and, last, `pages.show(page)`, which runs it inside the frame
  (ui/pages.py). Nothing else runs at import: module globals outlive the run through fragments and callbacks, so a
  page keeps its tensors in function locals.
- No module imports from a layer above its own (LAYERS), none imports tests/ but the tests, deploy/ never imports
  benchmarks/, and the module-level imports have no cycle.
- No module takes another module's private name (`from x import _y`, `x._y`): what two modules share gets a public
  name.
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


# ------------------------------------------------------------------------------------------- the import graph
# The layers, bottom up. A module may import from its own layer and the layers below it, never from one above.
LAYERS = (
    ("encoder",),  # the model library's core: config, model, trace, tokenizer, pretrained, devices
    ("encoder.analysis",),  # numbers from models and traces
    ("encoder.viz",),  # figures from numbers
    ("ui",),  # the only place Streamlit meets the library
    ("app", "pages"),  # the frame and the page scripts
    ("devkit",),  # tooling that drives the app: server launcher, protocol client, AppTest harness
    ("deploy",),  # serving a class (its warm-up uses devkit)
    ("benchmarks", "scripts"),  # measurements and maintenance scripts
    ("tests",),
)
SKIP_DIRS = {"node_modules", "artifacts", "__pycache__"}


def project_modules() -> dict[str, Path]:
    """Every Python file of the repository by module name (pages/inside-a-head.py is "pages.inside-a-head")."""
    mods = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if any(p.startswith(".") or p in SKIP_DIRS for p in parts):
            continue
        mods[".".join(parts).removesuffix(".py").removesuffix(".__init__")] = path
    return mods


MODULES = project_modules()


def layer(module: str) -> int:
    """The index in LAYERS of the most specific prefix that names this module."""
    best = max((len(prefix), i) for i, names in enumerate(LAYERS) for prefix in names
               if module == prefix or module.startswith(prefix + "."))
    return best[1]


def imports(module: str) -> list[tuple[ast.stmt, str, str | None, bool]]:
    """(statement, project module imported, name taken from it or None, at module level) for every import."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node, alias.name, None, id(node) in top) for alias in node.names if alias.name in MODULES]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    found.append((node, f"{base}.{alias.name}", None, id(node) in top))
                elif base in MODULES:
                    found.append((node, base, alias.name, id(node) in top))
    return found


def test_every_module_is_in_a_layer():
    assert all(layer(module) >= 0 for module in MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_from_a_layer_above(module):
    here = layer(module)
    up = sorted({target for _, target, _, _ in imports(module) if layer(target) > here})
    assert not up, f"{module} (layer {'/'.join(LAYERS[here])}) imports {up} from a layer above it"


def test_the_tools_never_import_the_tests_and_deploy_never_imports_benchmarks():
    for module in MODULES:
        targets = {target for _, target, _, _ in imports(module)}
        if module.split(".")[0] in ("deploy", "benchmarks", "scripts", "devkit"):
            assert not {t for t in targets if t.split(".")[0] == "tests"}, module
        if module.split(".")[0] == "deploy":
            assert not {t for t in targets if t.split(".")[0] == "benchmarks"}, module


def test_no_import_cycle():
    graph = {m: {t for _, t, _, top in imports(m) if top and t != m} for m in MODULES}
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                raise AssertionError(f"import cycle: {' -> '.join(path[path.index(t):] + [t])}")
            if t not in state:
                visit(t, [*path, t])
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m, [m])


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_reaches_into_another_modules_private_names():
    reaches = set()
    for module, path in MODULES.items():
        bound = {}  # local name -> project module it is bound to
        for node, target, name, _ in imports(module):
            if name is not None and private(name) and target != module:
                reaches.add((module, f"{target}.{name}"))
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                if name is None and target.endswith(alias.name):
                    bound[local] = target if alias.asname or "." not in alias.name else alias.name.split(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and private(node.attr) and isinstance(node.value, ast.Name)
                    and bound.get(node.value.id, module) != module):
                reaches.add((module, f"{bound[node.value.id]}.{node.attr}"))
    assert not reaches, f"private names used from another module: {sorted(reaches)}"
