"""Which public functions and methods lack a numpydoc ``Parameters`` section.

Public: the names in ``__all__`` of the modules of PUBLIC_MODULES (functions, classes and the
public methods those classes define or inherit from rfl_fast), counted once per object.
A callable without arguments (besides ``self``) needs no Parameters section. A method without a
docstring of its own is documented by the nearest class of its class's MRO that documents it
(documentation is written once, in the base class; Sphinx shows the inherited text).

    python tools/doc_coverage.py            # summary: documented / total
    python tools/doc_coverage.py --list     # and every callable that lacks the section
"""

import importlib
import inspect
import re
import sys

#: The public modules (the API reference documents the same; docs/conf.py reads this).
PUBLIC_MODULES = {
    "rfl_fast": "Top level: backends, threads, C++ headers (manifolds: rfl_fast.manifolds)",
    "rfl_fast.manifolds": "Manifolds",
    "rfl_fast.linalg": "Symmetric matrix functions",
    "rfl_fast.problems": "Federated problems",
    "rfl_fast.algorithms": "Federated algorithms",
    "rfl_fast.federation": "Federated engine: run, participation, consensus, schedules",
    "rfl_fast.privacy": "Differential privacy and accounting",
    "rfl_fast.data": "Data sets, generators and partitioners",
    "rfl_fast.app.estimators": "scikit-learn estimators",
    "rfl_fast.app.experiments": "The papers' experiments E1..E8",
    "rfl_fast.errors": "Errors",
}

_SECTION = re.compile(r"^\s*Parameters\s*\n\s*-{3,}\s*$", re.M)


def _takes_arguments(fn):
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    return any(p.name not in ("self", "cls") for p in params)


def _inherited_doc(cls, attr):
    """The docstring of ``cls.attr`` from the first class of ``cls.__mro__`` that has one (what
    ``inspect.getdoc`` finds only for classes reachable by their qualified name), or None."""
    for klass in cls.__mro__:
        member = vars(klass).get(attr)
        if getattr(member, "__doc__", None):
            return inspect.cleandoc(member.__doc__)
    return None


def _callables():
    """``{qualified name: (callable, docstring)}`` of the public API, each object once."""
    seen, out = set(), {}

    def add(name, obj, doc):
        if id(obj) not in seen:
            seen.add(id(obj))
            out[name] = (obj, doc)

    for modname in PUBLIC_MODULES:
        module = importlib.import_module(modname)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.ismodule(obj) or name.startswith("__"):
                continue
            if inspect.isclass(obj):
                if not issubclass(obj, BaseException):    # the constructor's parameters
                    add(f"{modname}.{name}", obj, inspect.getdoc(obj))
                for attr, member in inspect.getmembers(obj):
                    owner = getattr(member, "__module__", "") or ""
                    if attr.startswith("_") or not owner.startswith("rfl_fast"):
                        continue
                    if inspect.isfunction(member) or inspect.ismethod(member):  # + classmethods
                        add(f"{modname}.{name}.{attr}", member, _inherited_doc(obj, attr))
            elif callable(obj):
                add(f"{modname}.{name}", obj, inspect.getdoc(obj))
    return out


def missing():
    """Sorted names of the public callables that take arguments but lack ``Parameters``."""
    return sorted(name for name, (obj, doc) in _callables().items()
                  if _takes_arguments(obj) and not _SECTION.search(doc or ""))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    total = sum(_takes_arguments(obj) for obj, _ in _callables().values())
    lacking = missing()
    if "--list" in argv:
        print("\n".join(lacking))
    print(f"{total - len(lacking)} of {total} public callables with arguments have a "
          f"Parameters section; {len(lacking)} lack one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
