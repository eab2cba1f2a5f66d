"""Speed routes are kernels: no module of ``rfl_fast/algorithms/`` or ``rfl_fast/problems/``
names a backend, the compiled extension or a manifold class to choose a route (checked on the
syntax tree, so comments and docstrings may mention them); the kernels layer chooses."""

import ast
import pathlib

import pytest

import rfl_fast
from rfl_fast import kernels

PACKAGE = pathlib.Path(rfl_fast.__file__).parent
ROUTE_FREE = ("algorithms", "problems")
BACKEND_STRINGS = {*kernels.BACKENDS, "_core"}            # from the registries
MANIFOLDS = set(rfl_fast.manifolds.MANIFOLDS)
TYPE_TESTS = {"isinstance", "issubclass"}


def _docstrings(tree):
    """The string constants that are docstrings (or bare string statements)."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)}


def _names(node):
    """The plain and dotted names in ``node`` (a class, a tuple of classes, ...)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            yield sub.id
        elif isinstance(sub, ast.Attribute):
            yield sub.attr
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value


def _is_type_of(node):
    """Whether ``node`` is ``type(...)`` or ``type(...).__name__``."""
    if isinstance(node, ast.Attribute) and node.attr in ("__name__", "__qualname__"):
        node = node.value
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "type")


def route_choices(source, filename="<source>"):
    """``[(line, what)]``: every place in ``source`` that names a backend, the compiled
    extension or its functions, or tests a value's type against a manifold class."""
    tree = ast.parse(source, filename)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docs and node.value in BACKEND_STRINGS:
            found.append((line, f"backend string {node.value!r}"))
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            parts = set(mod.split(".")) | {a.name for a in node.names}
            if parts & {"_core", "_numba", "_dispatch"}:
                found.append((line, f"import from {'.' * node.level}{mod}"))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if set(a.name.split(".")) & {"_core", "_numba", "numba"}:
                    found.append((line, f"import {a.name}"))
        elif isinstance(node, (ast.Name, ast.Attribute)):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in ("_core", "_numba"):
                found.append((line, f"name {name}"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in TYPE_TESTS and len(node.args) == 2:
            hit = MANIFOLDS.intersection(_names(node.args[1]))
            if hit:
                found.append((line, f"{node.func.id}(..., {sorted(hit)[0]})"))
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_type_of(s) for s in sides):
                hit = MANIFOLDS.intersection(n for s in sides if not _is_type_of(s)
                                             for n in _names(s))
                if hit:
                    found.append((line, f"type comparison with {sorted(hit)[0]}"))
        if isinstance(node, ast.match_case) and isinstance(node.pattern, ast.MatchClass):
            hit = MANIFOLDS.intersection(_names(node.pattern.cls))
            if hit:
                found.append((line, f"match on class {sorted(hit)[0]}"))
    return found


def _modules():
    for floor in ROUTE_FREE:
        yield from sorted((PACKAGE / floor).rglob("*.py"))


@pytest.mark.parametrize("path", list(_modules()), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_algorithms_and_problems_choose_no_route(path):
    assert route_choices(path.read_text(encoding="utf-8"), str(path)) == []


def test_modules_are_found():
    assert {p.parent.name for p in _modules()} >= set(ROUTE_FREE)


@pytest.mark.parametrize("source,what", [
    ("if isinstance(problem.manifold, Stiefel): pass", "isinstance(..., Stiefel)"),
    ("ok = isinstance(M, (manifolds.Sphere, int))", "isinstance(..., Sphere)"),
    ("ok = issubclass(cls, SPD)", "issubclass(..., SPD)"),
    ("ok = type(M) is Lorentz", "type comparison with Lorentz"),
    ("ok = type(M).__name__ == 'Grassmann'", "type comparison with Grassmann"),
    ("match M:\n    case Product(): pass", "match on class Product"),
    ("f(x, backend='numba')", "backend string 'numba'"),
    ("with rf.backend('cpp'): pass", "backend string 'cpp'"),
    ("route = 'numpy' if small else 'auto'", "backend string 'numpy'"),
    ("from .._core import pca_local_steps", "import from .._core"),
    ("from ..kernels import _dispatch", "import from ..kernels"),
    ("import rfl_fast._core", "import rfl_fast._core"),
    ("fn = kernels._core.stiefel_proj", "name _core"),
])
def test_the_check_finds_each_kind_of_route_choice(source, what):
    assert [w for _, w in route_choices(source)] == [what]


def test_the_check_ignores_docstrings_comments_and_other_types():
    source = ('"""Uses the C++ kernel (\'cpp\') on Stiefel; isinstance(M, Stiefel)."""\n'
              "# isinstance(M, Stiefel), backend='numba'\n"
              "def f(M):\n"
              "    '''numpy'''\n"
              "    return isinstance(M, Manifold) and type(M) is not dict\n")
    assert route_choices(source) == []


def test_warm_up_loads_the_backends_and_calls_each_kernel_on_each(monkeypatch):
    calls = []
    real = kernels.resolve

    def spy(name, backend=None, shape=None):
        b, fn = real(name, backend, shape)
        return b, lambda *a: calls.append((name, b)) or fn(*a)

    monkeypatch.setattr(kernels, "resolve", spy)
    backends = kernels.warm_up(["stiefel_proj", "lorentz_exp", "stiefel_proj"])
    assert backends == kernels.available_backends() and "numpy" in backends
    assert calls == [(n, b) for n in ("stiefel_proj", "lorentz_exp") for b in backends]
