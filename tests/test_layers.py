"""The house has floors: imports go down only, and no module imports itself through others.

Every import statement counts, including those inside functions (a lazy import is still a
dependency). The floors, lowest first: the basement (kernels, and the validation, error and
file helpers everything uses), the ground (manifolds, linalg), the first floor (problems,
algorithms with their building blocks, privacy, data), the second floor (federation: the round
engine) and the roof (``app/``: CLI, config, runner, experiments, estimators, benchmarks; the
Flower app; the interop adapters). A new top-level module or folder must be given its floor here.
"""

import ast
import pathlib

import rfl_fast

PACKAGE = pathlib.Path(rfl_fast.__file__).parent

FLOORS = {
    0: ("errors", "_validation", "_files", "_typing", "kernels", "_core"),
    1: ("manifolds", "linalg"),
    2: ("problems", "algorithms", "privacy", "data"),
    3: ("federation",),
    # the roof: app/ (CLI, config, runner, experiments, estimators, demo, bench, plotting), the
    # Flower app, the interop adapters, and the old import paths of app modules (re-exports)
    4: ("app", "flower", "interop", "__main__", "config", "runner", "plotting", "estimators",
        "experiments"),
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
