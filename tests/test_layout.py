"""The package layout (issue 12): no import cycle inside bayes_eval, no module above 800 lines.

The import graph is read from the source with :mod:`ast` (nothing is imported): every module of
the package is a node (a package's ``__init__`` is the node of the package), and every import of a
``bayes_eval`` module *anywhere* in a module (top level, function bodies, ``TYPE_CHECKING``
blocks) is an edge, as is every ``importlib.import_module("...")`` call with a string constant.
Resolution:

* ``from . import x`` / ``from pkg import x``: the submodule ``pkg.x`` when there is one;
* ``from pkg import Name`` where ``Name`` is not a submodule: the module that defines ``Name``
  (followed through the package's ``from .m import Name`` re-exports and through a lazy-import
  table ``{"Name": ".module"}`` in its ``__init__``, PEP 562); the ``__init__`` itself only when
  it defines ``Name``. So a module may write ``from bayes_eval import Population`` without
  depending on everything the top-level package re-exports;
* ``import pkg.mod`` / ``from pkg.mod import Name``: ``pkg.mod`` (the parent packages run
  first, but they are not counted: otherwise every module would depend on ``bayes_eval``, which
  imports most of them);
* ``import bayes_eval`` (the whole package) is an edge to ``bayes_eval``'s ``__init__``.

Strongly connected components (Tarjan) with more than one module, or a module importing itself,
are cycles. ``test_cycle_finder_finds_a_hidden_cycle`` shows on a synthetic package that the
check fails when it should (including a cycle hidden in a function body or behind importlib).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "bayes_eval"
MAX_LINES = 800


# ----------------------------------------------------------------------------- the graph
def _modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the package at ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve_relative(module: str, path: Path, level: int, target: str | None) -> str:
    """Absolute name of ``from <level dots><target> import ...`` written in ``module``."""
    package = module if _is_package(path) else module.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{target}" if target else package


def _resolve_importlib(module: str, path: Path, name: str, call: ast.Call) -> str:
    """Absolute name of ``importlib.import_module(name, anchor)`` for a relative ``name``: the
    anchor is the module itself for ``__name__`` (importlib treats it as a package), its
    package otherwise (``__package__``)."""
    anchor_arg = call.args[1] if len(call.args) > 1 else None
    if isinstance(anchor_arg, ast.Name) and anchor_arg.id == "__name__":
        anchor = module
    else:
        anchor = module if _is_package(path) else module.rpartition(".")[0]
    level = len(name) - len(name.lstrip("."))
    for _ in range(level - 1):
        anchor = anchor.rpartition(".")[0]
    rest = name.lstrip(".")
    return f"{anchor}.{rest}" if rest else anchor


def _lazy_table(tree: ast.Module) -> dict[str, str]:
    """``{"Name": ".module"}`` dict literals of a package ``__init__`` (PEP 562 lazy imports)."""
    table: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Dict):
            pairs = zip(node.value.keys, node.value.values, strict=True)
            for k, v in pairs:
                if (
                    isinstance(k, ast.Constant)
                    and isinstance(k.value, str)
                    and isinstance(v, ast.Constant)
                    and isinstance(v.value, str)
                    and v.value.startswith(".")
                ):
                    table[k.value] = v.value
    return table


class Graph:
    """The import graph of one package (see the module docstring for the rules)."""

    def __init__(self, root: Path) -> None:
        self.root_name = root.name
        self.files = _modules(root)
        self.trees = {m: ast.parse(p.read_text(encoding="utf-8")) for m, p in self.files.items()}
        self.edges: dict[str, set[str]] = {m: set() for m in self.files}
        for module in self.files:
            self.edges[module] = self._imports(module)

    def _ours(self, name: str) -> bool:
        return name == self.root_name or name.startswith(self.root_name + ".")

    def _nearest_module(self, name: str) -> str | None:
        """``name`` or its longest prefix that is a module of the package."""
        while name:
            if name in self.files:
                return name
            name = name.rpartition(".")[0]
        return None

    def _definer(self, package: str, name: str, seen: frozenset = frozenset()) -> str:
        """The module that defines ``name`` imported from ``package`` (see the docstring)."""
        if f"{package}.{name}" in self.files:
            return f"{package}.{name}"
        if package not in self.files or not _is_package(self.files[package]):
            return package
        if (package, name) in seen:
            return package
        seen = seen | {(package, name)}
        tree = self.trees[package]
        path = self.files[package]
        lazy = _lazy_table(tree)
        if name in lazy:
            return self._nearest_module(_resolve_relative(package, path, 1, lazy[name][1:]))
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) != name:
                        continue
                    source = (
                        _resolve_relative(package, path, node.level, node.module)
                        if node.level
                        else node.module or ""
                    )
                    if not self._ours(source):
                        return package
                    return self._definer(source, alias.name, seen)
        return package  # defined in the __init__ itself (or unknown): the package

    def _imports(self, module: str) -> set[str]:
        path = self.files[module]
        out: set[str] = set()
        for node in ast.walk(self.trees[module]):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if self._ours(alias.name):
                        target = self._nearest_module(alias.name)
                        if target is not None:
                            out.add(target)
            elif isinstance(node, ast.ImportFrom):
                source = (
                    _resolve_relative(module, path, node.level, node.module)
                    if node.level
                    else node.module or ""
                )
                if not self._ours(source):
                    continue
                base = self._nearest_module(source)
                if base is None:
                    continue
                for alias in node.names:
                    if alias.name == "*":
                        out.add(base)
                    elif base == source:
                        out.add(self._definer(source, alias.name))
                    else:
                        out.add(base)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute | ast.Name)
                and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
                == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                name = node.args[0].value
                if name.startswith("."):
                    name = _resolve_importlib(module, path, name, node)
                if self._ours(name):
                    target = self._nearest_module(name)
                    if target is not None:
                        out.add(target)
        if _is_package(path):  # a lazy-import table: edges from the package to its modules
            for rel in _lazy_table(self.trees[module]).values():
                target = self._nearest_module(_resolve_relative(module, path, 1, rel[1:]))
                if target is not None:
                    out.add(target)
        return out


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in edges:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == node:
                        break
                out.append(sorted(component))
    return out


def cycles(root: Path) -> list[list[str]]:
    """Import cycles of the package at ``root``: components of two or more modules, and
    modules that import themselves."""
    graph = Graph(root)
    comps = strongly_connected(graph.edges)
    return [c for c in comps if len(c) > 1 or c[0] in graph.edges[c[0]]]


# ----------------------------------------------------------------------------- the checks
def test_no_import_cycle_in_bayes_eval():
    found = cycles(ROOT)
    assert not found, "import cycles (strongly connected modules):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_no_module_above_800_lines():
    sizes = {
        str(p.relative_to(ROOT.parent)): len(p.read_text(encoding="utf-8").splitlines())
        for p in ROOT.rglob("*.py")
    }
    over = {name: n for name, n in sorted(sizes.items()) if n > MAX_LINES}
    assert not over, f"modules above {MAX_LINES} lines: " + ", ".join(
        f"{name} ({n})" for name, n in over.items()
    )


# ----------------------------------------------------------------------------- self-tests
def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


CLEAN = {
    "pkg/__init__.py": (
        "from .base import Base\n"
        "_LAZY = {'Top': '.top'}\n"
        "def __getattr__(name):\n"
        "    import importlib\n"
        "    return importlib.import_module(_LAZY[name], __name__)\n"
    ),
    "pkg/base.py": "X = 1\nclass Base: ...\n",
    "pkg/sub/__init__.py": "from .leaf import Leaf\n",
    "pkg/sub/leaf.py": "from ..base import X\nclass Leaf: ...\n",
    # a module may import names through the package: edges go to the defining modules
    "pkg/top.py": "from pkg import Base\nfrom pkg.sub import Leaf\nfrom . import sub\n",
}


def test_cycle_finder_passes_a_clean_package(tmp_path):
    root = _write(tmp_path, CLEAN)
    graph = Graph(root)
    assert graph.edges["pkg"] == {"pkg.base", "pkg.top"}  # re-export and lazy table
    assert graph.edges["pkg.top"] == {"pkg.base", "pkg.sub.leaf", "pkg.sub"}
    assert graph.edges["pkg.sub.leaf"] == {"pkg.base"}
    assert cycles(root) == []


@pytest.mark.parametrize(
    ("extra", "cycle"),
    [
        # a function-level import hiding a cycle
        (
            {"pkg/base.py": "X = 1\nclass Base: ...\ndef f():\n    from .sub.leaf import Leaf\n"},
            ["pkg.base", "pkg.sub.leaf"],
        ),
        # importlib with a string constant
        (
            {
                "pkg/base.py": "import importlib\nX = 1\nclass Base: ...\n"
                "M = importlib.import_module('pkg.top')\n"
            },
            ["pkg.base", "pkg.sub", "pkg.sub.leaf", "pkg.top"],
        ),
        # a relative importlib call
        (
            {
                "pkg/sub/leaf.py": "from ..base import X\nimport importlib\n"
                "importlib.import_module('..top', __package__)\n"
                "class Leaf: ...\n"
            },
            ["pkg.sub", "pkg.sub.leaf", "pkg.top"],
        ),
        # importing the whole package from a module the package imports
        (
            {"pkg/base.py": "import pkg\nX = 1\nclass Base: ...\n"},
            ["pkg", "pkg.base", "pkg.sub", "pkg.sub.leaf", "pkg.top"],
        ),
        # a module importing itself
        ({"pkg/base.py": "from . import base\nX = 1\nclass Base: ...\n"}, ["pkg.base"]),
    ],
)
def test_cycle_finder_finds_a_hidden_cycle(tmp_path, extra, cycle):
    root = _write(tmp_path, {**CLEAN, **extra})
    found = cycles(root)
    assert cycle in found, found


def test_tarjan_on_known_graphs():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": set()}
    comps = sorted(strongly_connected(edges))
    assert comps == [["a", "b", "c"], ["d", "e"], ["f"]]
