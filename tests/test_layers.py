"""The house has floors: imports go down only, and no module imports itself through others.

Every import statement counts, including those inside functions (a lazy import is still a
dependency). The floors, lowest first: the basement (kernels, and the validation, error and
file helpers everything uses), the ground (manifolds, linalg), the first floor (problems,
algorithms with their building blocks, privacy, data), the second floor (federation: the round
engine) and the roof (``app/``: CLI, config, runner, experiments, estimators, benchmarks; the
Flower app; the interop adapters). A new top-level module or folder must be given its floor here.
"""

import ast
import importlib.util
import pathlib
import sys

import rfl_fast

PACKAGE = pathlib.Path(rfl_fast.__file__).parent

FLOORS = {
    0: ("errors", "_validation", "_files", "_typing", "_docs", "kernels", "_core"),
    1: ("manifolds", "linalg"),
    2: ("problems", "algorithms", "privacy", "data"),
    3: ("federation",),
    # the roof: app/ (CLI, config, runner, experiments, estimators, demo, bench, plotting), the
    # Flower app and the interop adapters
    4: ("app", "flower", "interop", "__main__"),
}
FLOOR = {name: level for level, names in FLOORS.items() for name in names}


def _modules():
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _graph():
    """module -> set of package modules it imports (anywhere in its body)."""
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    deps.add(sub if sub in mods else target)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def _floor(module):
    parts = module.split(".")
    return None if len(parts) == 1 else FLOOR.get(parts[1], "undeclared")


def test_every_module_has_a_floor():
    undeclared = sorted({m.split(".")[1] for m in _graph() if _floor(m) == "undeclared"})
    assert not undeclared, f"give these a floor in FLOORS: {undeclared}"


def test_imports_go_down_only():
    up = []
    for module, deps in _graph().items():
        here = _floor(module)
        if here is None:  # the package root re-exports the public API of every floor
            continue
        up += [f"{module} ({here}) -> {d} ({_floor(d)})" for d in sorted(deps)
               if _floor(d) is not None and _floor(d) > here]
    assert not up, "\n".join(up)


def test_no_import_cycles():
    graph = _graph()
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, cycles


# ------------------------------------------------------------------------ hooks, not probes

#: Packages whose hooks are base-class members with a default (read directly, never probed).
HOOK_PACKAGES = ("algorithms", "problems", "privacy", "federation")
#: Receivers whose optional members would be hooks (``getattr(problem, "x", None)``).
HOOK_OWNERS = {"problem", "algorithm", "alg", "self", "cls"}


def _is_class_member(node):
    """``type(x).name``, ``Class.name`` or ``getattr(type(x) or Class, ...)``: a member looked
    up on a class (what a method-identity check compares)."""
    def is_class(v):
        return ((isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
                 and v.func.id == "type") or (isinstance(v, ast.Name) and v.id[:1].isupper()))
    if isinstance(node, ast.Attribute):
        return is_class(node.value)
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "getattr" and bool(node.args) and is_class(node.args[0]))


def _hook_findings():
    """(file, kind, receiver, name) of every hook probe, method-identity check and ndarray
    subclass in ``HOOK_PACKAGES``."""
    found = set()
    for package in HOOK_PACKAGES:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            rel = path.relative_to(PACKAGE.parent).as_posix()
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                        and isinstance(node.args[0], ast.Name)
                        and node.args[0].id in HOOK_OWNERS
                        and isinstance(node.args[1], ast.Constant)):
                    found.add((rel, node.func.id, node.args[0].id, node.args[1].value))
                elif isinstance(node, ast.Compare) and any(
                        isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
                    sides = [node.left, *node.comparators]
                    if any(_is_class_member(s) for s in sides):
                        found.add((rel, "identity", ast.unparse(node), ""))
                elif isinstance(node, ast.ClassDef):
                    bases = [ast.unparse(b) for b in node.bases]
                    if any(b in ("np.ndarray", "numpy.ndarray", "ndarray") for b in bases):
                        found.add((rel, "ndarray subclass", node.name, ""))
                elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                      and node.func.attr == "view" and node.args
                      and isinstance(node.args[0], ast.Name) and node.args[0].id[:1].isupper()):
                    found.add((rel, "view as a type", node.args[0].id, ""))
    return found


def test_hooks_are_base_class_members_not_probes():
    """Every optional algorithm/problem hook is a base-class method or attribute with a
    default, read directly: no ``getattr(problem, "hook", None)`` / ``hasattr(algorithm, ...)``
    probes, no method-identity checks (``type(self).m is Base.m``) and no ndarray subclass
    whose type carries a message (a declared capability or an explicit field instead)."""
    found = _hook_findings()
    assert not found, "\n".join(map(str, sorted(found)))


def test_the_hook_walk_sees_each_kind(tmp_path, monkeypatch):
    bad = tmp_path / "rfl_fast" / "algorithms"
    bad.mkdir(parents=True)
    (bad / "bad.py").write_text(
        "import numpy as np\n"
        "class Tag(np.ndarray):\n    pass\n"
        "def f(problem, algorithm, x):\n"
        "    a = getattr(problem, 'local_steps', None)\n"
        "    b = hasattr(algorithm, 'for_run')\n"
        "    c = type(algorithm).step is Base.step\n"
        "    return x.view(Tag)\n")
    here = sys.modules[__name__]
    monkeypatch.setattr(here, "PACKAGE", tmp_path / "rfl_fast")
    monkeypatch.setattr(here, "HOOK_PACKAGES", ("algorithms",))
    kinds = {f[1] for f in _hook_findings()}
    assert kinds == {"getattr", "hasattr", "identity", "ndarray subclass", "view as a type"}


def test_no_module_is_a_shim():
    """One public path per name: no module only re-exports another (``from x import *``)."""
    shims = []
    for path in PACKAGE.rglob("*.py"):
        body = ast.parse(path.read_text()).body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        if body and all(isinstance(node, ast.ImportFrom) for node in body) \
                and any(alias.name == "*" for node in body for alias in node.names):
            shims.append(str(path.relative_to(PACKAGE)))
    assert not shims, f"modules that only re-export another: {shims}"


def _reexports(path, name):
    """The names ``__all__`` of module ``name`` (at ``path``) lists that it only imports from a
    module that is not one of its own submodules (none for a package gathering its own)."""
    tree = ast.parse(path.read_text())
    exported, imported, defined = [], {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__"
                                                for t in node.targets):
            exported = [e.value for e in ast.walk(node.value)     # a list, or lists added
                        if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    for node in tree.body:                      # top-level bindings (try/if blocks included)
        for sub in ast.walk(node) if isinstance(node, (ast.Try, ast.If)) else (node,):
            if isinstance(sub, ast.ImportFrom):
                own = path.name == "__init__.py" and sub.level == 1 and sub.module
                for alias in sub.names:
                    imported[alias.asname or alias.name] = not own
            elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                defined.add(sub.name)
            elif isinstance(sub, (ast.Assign, ast.AnnAssign)):
                for t in sub.targets if isinstance(sub, ast.Assign) else (sub.target,):
                    defined.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return [n for n in exported if imported.get(n) and n not in defined]


def test_a_name_has_one_public_home():
    """One public path per name: a module's ``__all__`` lists what it defines (a package, also
    what its own submodules define). Only the public modules the API reference documents
    (``tools/doc_coverage.PUBLIC_MODULES``) gather names from the floors below, and no name is
    public in two of them."""
    public = set(_public_modules())
    others = {name: path for name, path in _modules().items()      # _typing: type aliases
              if name not in public and name != "rfl_fast._typing"}
    found = {name: r for name, path in others.items() if (r := _reexports(path, name))}
    for name in sorted(n for n in others if not n.endswith("__main__")):
        try:                                    # a package gathering from its submodules:
            module = importlib.import_module(name)  # what they define, not what they import
        except ModuleNotFoundError as exc:      # an optional extra not installed (flwr)
            if (exc.name or "").startswith("rfl_fast"):
                raise
            continue
        for n in getattr(module, "__all__", ()):
            home = getattr(getattr(module, n), "__module__", None)
            if isinstance(home, str) and home.startswith("rfl_fast") and home != name \
                    and not home.startswith(name + "."):
                found[name] = found.get(name, []) + [f"{n} (from {home})"]
    assert not found, f"names exported again by a module that does not define them: {found}"
    homes = {}
    for modname in public - {"rfl_fast"}:                 # the root re-exports each floor's API
        module = importlib.import_module(modname)
        for n in module.__all__:
            obj = getattr(module, n)
            if isinstance(getattr(obj, "__module__", None), str):
                homes.setdefault(id(obj), []).append(f"{modname}.{n}")
    twice = [paths for paths in homes.values() if len(paths) > 1]
    assert not twice, f"public under two paths: {twice}"


def _public_modules():
    here = pathlib.Path(__file__).resolve().parents[1] / "tools" / "doc_coverage.py"
    spec = importlib.util.spec_from_file_location("doc_coverage", here)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PUBLIC_MODULES


def test_the_reexport_check_sees_one(tmp_path):
    shim = tmp_path / "m.py"
    shim.write_text('from .other import thing, KINDS\n__all__ = ["thing", "KINDS", "own"]\n'
                    'own = 1\n')
    assert _reexports(shim, "pkg.m") == ["thing", "KINDS"]
    package = tmp_path / "__init__.py"
    package.write_text('from .sub import thing\nfrom ..up import other\n'
                       '__all__ = ["thing", "other"]\n')
    assert _reexports(package, "pkg") == ["other"]


def _private_crossings(graph):
    """``(importer, module)`` where a private module (a part after the root starting with
    ``_``) is imported from outside the package that holds it."""
    found = []
    for module, deps in sorted(graph.items()):
        for dep in sorted(deps):
            parts = dep.split(".")
            for i in range(2, len(parts)):
                if parts[i].startswith("_") and not parts[i].startswith("__"):
                    package = ".".join(parts[:i])
                    if module != package and not module.startswith(package + "."):
                        found.append((module, dep))
                    break
    return found


def test_a_private_module_is_imported_only_from_its_own_package():
    """A package's private modules (``algorithms._checks``, ``kernels._dispatch``) are its own
    business: another package imports what the package makes public, so no private name
    crosses packages (the root's helpers ``_validation``, ``_files`` serve every floor)."""
    assert _private_crossings({"rfl_fast.federation.engine": {"rfl_fast.algorithms._checks"},
                               "rfl_fast.algorithms.svrg": {"rfl_fast.algorithms._checks"},
                               "rfl_fast.data": {"rfl_fast._validation"}}) == \
        [("rfl_fast.federation.engine", "rfl_fast.algorithms._checks")]
    assert not _private_crossings(_graph())
