"""The array seam: arrays of any array-API namespace in, the caller's array type out.

The compiled kernels and the NumPy code above them compute on NumPy arrays. A public call that
receives arrays of another namespace (PyTorch, JAX, CuPy, array-api-strict: anything with
``__dlpack__`` or ``__array_namespace__``) goes through :func:`accepts_arrays`: the caller's
namespace and device are found (``array_api_compat.array_namespace``), every foreign argument
becomes a NumPy array (:func:`to_numpy`), the NumPy code runs as it does for NumPy callers
(today's dtype rules: float64 working precision, float32 in gives float32 out, integers become
float64), and every floating-point result goes back as the caller's array type on the caller's
device (:func:`from_numpy`).

Copies. A CPU array reaches the kernels without a copy (``np.from_dlpack`` of its memory, any
strides; a PyTorch CPU tensor by ``Tensor.numpy``, the same view, cheaper); results of PyTorch
CPU callers go back without a copy (``torch.from_numpy``). An array on another device (a GPU)
is copied to the host and the result copied back: a round trip per call, correct but not fast
(there are no GPU routes yet; this route is untested without a GPU). JAX arrays are immutable,
so their results are copied into JAX's own buffers.

Gradients. An argument that carries a gradient (a tensor with ``requires_grad`` or inside
``torch.func``, a JAX tracer under ``grad``/``jit``/``vmap``) cannot go through NumPy: the
method's differentiable route (:mod:`rfl_fast.kernels.xp_routes`, declared by the manifold in
``array_routes``) runs instead, the same formulas in the caller's namespace, so that autograd,
``jax.grad``, ``jit`` and ``vmap`` trace through it (proj, retr, exp, log, dist, the transports
of Euclidean, Sphere, Stiefel, SPD, Lorentz, Grassmann, Product; inner, norm, egrad2rgrad,
project; the functions of ``rfl_fast.linalg``).
A call without a gradient keeps the NumPy/compiled route.

What is refused, naming the argument: arrays of two foreign namespaces in one call (a torch
tensor and a JAX array; NumPy arrays and Python numbers mix with any one namespace), arrays of
one namespace on two devices, and arrays that carry a gradient where the method (or its
``method=`` option) has no differentiable route: detaching silently would drop the caller's
gradient.

A plain NumPy call pays one type test per argument and never imports ``array_api_compat``
(imported on the first foreign array, an optional dependency: the ``torch``, ``jax`` and
``array-api`` extras install it). The commonest foreign call, PyTorch CPU tensors without a
gradient, takes a short route in the wrapper itself (:func:`_torch_views`,
:func:`_torch_back`): a ``Tensor.numpy`` view per tensor and ``torch.from_numpy`` of the
answer, about 0.7 us each, and no namespace lookup.

Functions take the seam too (``accepts_arrays(fn, method=False)``): the public functions of
:mod:`rfl_fast.linalg`.
"""

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["accepts_arrays", "is_foreign", "to_numpy", "from_numpy", "Caller", "caller_of", "NoRoute"]

#: DLPack's device type of host memory (``kDLCPU``) and of pinned host memory
_DLPACK_HOST = (1, 3)

#: Types known to need no conversion (NumPy arrays, Python numbers, strings, method tuples,
#: random generators, ...): the fast path's test. Types met later that are not foreign arrays
#: are added on first sight, so each type is classified once.
_NATIVE = {np.ndarray, float, int, bool, str, type(None), tuple, list, dict, np.float64,
           np.float32, np.int64, np.int32, np.bool_, np.random.Generator,
           np.random.SeedSequence}
_FOREIGN: set = set()
#: The foreign types that are PyTorch tensors (their own, cheaper calls: ``Tensor.numpy``,
#: ``Tensor.device``, ``torch.from_numpy``)
_TORCH: set = set()
#: ``(type, device) -> Caller``: one namespace lookup per array type and device
_CALLERS: dict = {}



class NoRoute(Exception):
    """Raised by a route that cannot serve this call (an option it does not cover; Stiefel's
    ``exp`` in a namespace without a differentiable ``expm``): the seam then refuses the
    gradient-carrying argument as for a method without a route."""


def _foreign_type(t):
    """Whether instances of type ``t`` are foreign arrays (classified once per type)."""
    if t in _FOREIGN:
        return True
    if issubclass(t, (np.ndarray, np.generic)) or not (
            hasattr(t, "__dlpack__") or hasattr(t, "__array_namespace__")):
        _NATIVE.add(t)
        return False
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(t, torch.Tensor):
        global _functorch_wrapped
        _functorch_wrapped = getattr(getattr(torch._C, "_functorch", None),
                                     "is_functorch_wrapped_tensor", None) or _never
        _TORCH.add(t)
    _FOREIGN.add(t)
    return True


def _never(a):
    return False


#: ``torch._C._functorch.is_functorch_wrapped_tensor`` once torch is met (whether a tensor is
#: wrapped by ``torch.func``: it carries a gradient or a batch axis)
_functorch_wrapped = _never


def is_foreign(a: Any) -> bool:
    """Whether ``a`` is an array of a namespace other than NumPy.

    Parameters
    ----------
    a : object
        Any argument.

    Returns
    -------
    bool
        ``True`` for arrays with ``__dlpack__`` or ``__array_namespace__`` that are not NumPy
        arrays or scalars (PyTorch tensors, JAX and CuPy arrays, array-api-strict arrays).
    """
    t = type(a)
    return t not in _NATIVE and _foreign_type(t)


def _compat():
    import array_api_compat  # an optional dependency: only a foreign array gets here

    return array_api_compat


def _carries_gradient(a):
    """Whether the foreign array ``a`` takes part in autodiff or tracing: a torch tensor with
    ``requires_grad`` or wrapped by ``torch.func`` (``grad``, ``vmap``), a JAX tracer."""
    if getattr(a, "requires_grad", False):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor):
        _foreign_type(type(a))  # a tensor type: classified, and the functorch test found
        return bool(_functorch_wrapped(a))
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(a, jax.core.Tracer)


def _refuse_gradient(a, name, what=None):
    """Raise for an array that carries a gradient (torch ``requires_grad``, a JAX tracer)
    where no differentiable route exists (``what``: the method, for the message)."""
    if not _carries_gradient(a):
        return
    where = f"{what} has no differentiable route" if what else "this call is not differentiable"
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(a, jax.core.Tracer):
        raise NotImplementedError(
            f"{name}: a JAX tracer (under jax.grad, jit or vmap); {where} (see "
            "rfl_fast.kernels.xp_routes): call it on concrete arrays")
    raise NotImplementedError(
        f"{name}: a tensor that requires grad; {where} (see rfl_fast.kernels.xp_routes), "
        f"and detaching it silently would drop your gradient: pass {name}.detach() to "
        "compute without one")


class Caller:
    """The caller's array namespace and device: how results go back.

    Parameters
    ----------
    xp : module
        The namespace (``array_api_compat.array_namespace`` of the caller's arrays).
    device : object
        The device of the caller's arrays (``array_api_compat.device``).
    """

    def __init__(self, xp: Any, device: Any) -> None:
        self.xp, self.device = xp, device
        self._torch = sys.modules.get("torch") if _compat().is_torch_namespace(xp) else None
        self._host = self._torch is None or getattr(device, "type", "cpu") == "cpu"

    def wrap(self, out: np.ndarray) -> Any:
        """``out`` as the caller's array on the caller's device.

        Parameters
        ----------
        out : ndarray
            A NumPy result.

        Returns
        -------
        array
            The same values in the caller's namespace (PyTorch CPU: sharing ``out``'s memory).
        """
        if self._torch is not None:
            if not out.flags.writeable:
                out = np.array(out)  # torch shares writeable memory only (else it warns)
            try:
                t = self._torch.from_numpy(out)
            except (ValueError, TypeError, RuntimeError):  # negative strides, misaligned
                t = self._torch.from_numpy(np.array(out))
            return t if self._host else t.to(self.device)
        return self.xp.asarray(out, device=self.device)

    def same(self, other: "Caller") -> bool:
        """Whether ``other`` is the same namespace on the same device.

        Parameters
        ----------
        other : Caller
            The namespace and device of another argument.

        Returns
        -------
        bool
        """
        return other is self or (other.xp is self.xp and (
            other.device == self.device or other.device is None or self.device is None))


def _caller(a, name):
    """The Caller of one foreign array (cached per array type and device)."""
    t = type(a)
    if t in _TORCH:
        dev = a.device
    else:
        try:
            dev = _compat().device(a)
        except Exception as exc:
            raise TypeError(f"{name}: an array of no supported array namespace "
                            f"({t.__module__}.{t.__qualname__}): {exc}") from None
    key = (t, dev)
    try:
        return _CALLERS[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable device
        key = None
    try:
        xp = _compat().array_namespace(a)
    except TypeError as exc:
        raise TypeError(f"{name}: an array of no supported array namespace "
                        f"({t.__module__}.{t.__qualname__}): {exc}") from None
    caller = Caller(xp, dev)
    if key is not None and len(_CALLERS) < 256:
        _CALLERS[key] = caller
    return caller


def _mismatch(first, first_name, other, name):
    """The ``TypeError`` of two arguments of two namespaces or devices."""
    if other.xp is not first.xp:
        return TypeError(f"{name}: an array of namespace {other.xp.__name__}, but {first_name} "
                         f"is of {first.xp.__name__}; pass the arrays of one call in one "
                         "namespace (NumPy arrays and Python numbers mix with any)")
    return TypeError(f"{name}: an array on device {other.device}, but {first_name} is on "
                     f"{first.device}; pass the arrays of one call on one device")


def caller_of(arrays: dict[str, Any]) -> Caller:
    """The one namespace and device of the foreign ``arrays`` (name -> array).

    Parameters
    ----------
    arrays : dict of str to array
        The foreign array arguments of one call, by argument name (at least one).

    Returns
    -------
    Caller

    Raises
    ------
    TypeError
        If they belong to two namespaces or lie on two devices (both arguments named).
    """
    first = first_name = None
    for name, a in arrays.items():
        c = _caller(a, name)
        if first is None:
            first, first_name = c, name
        elif not first.same(c):
            raise _mismatch(first, first_name, c, name)
    return first


def to_numpy(a: Any, name: str) -> np.ndarray:
    """A foreign array as a NumPy array for the compute.

    Host memory (CPU) is shared, not copied (``np.from_dlpack``, any strides; a PyTorch CPU
    tensor through ``Tensor.numpy``, the same view at a third of the cost); an array on another
    device is copied to the host.

    Parameters
    ----------
    a : array
        An array of a namespace other than NumPy (:func:`is_foreign`).
    name : str
        Argument name for error messages.

    Returns
    -------
    ndarray
        The same values (the same memory for a host array; read-only where the producer's
        memory is, e.g. JAX's).

    Raises
    ------
    NotImplementedError
        If ``a`` carries a gradient (``requires_grad``, a JAX tracer).
    TypeError
        If its dtype has no NumPy equivalent (e.g. bfloat16).
    """
    _refuse_gradient(a, name)
    return _host_view(a, type(a) in _TORCH and a.device.type == "cpu", name)


def _host_view(a, torch_cpu, name):
    """``to_numpy`` after the gradient check; ``torch_cpu``: ``a`` is a PyTorch CPU tensor."""
    if torch_cpu:
        try:
            return a.numpy()
        except (TypeError, RuntimeError):
            pass  # a dtype or layout NumPy cannot view: the general route says which
    try:
        host = a.__dlpack_device__()[0] in _DLPACK_HOST
    except (AttributeError, TypeError, ValueError, BufferError, RuntimeError):
        host = True  # no DLPack: NumPy's own conversion below
    try:
        if host:
            return np.from_dlpack(a)
        try:  # the standard's host copy (NumPy >= 2.1 asks the producer for it)
            return np.from_dlpack(a, device="cpu", copy=True)
        except (TypeError, ValueError, BufferError, RuntimeError):
            return np.from_dlpack(_compat().to_device(a, "cpu"))
    except (TypeError, ValueError, BufferError, RuntimeError, AttributeError) as exc:
        try:  # a layout DLPack refuses (e.g. torch's lazy conjugation): NumPy's conversion
            return np.asarray(a)
        except Exception:
            raise TypeError(f"{name}: cannot read this {type(a).__qualname__} as a NumPy "
                            f"array (dtype {getattr(a, 'dtype', '?')}): {exc}; accepted: "
                            "float64, float32, integers") from None


def from_numpy(out: Any, caller: Caller) -> Any:
    """Results back to the caller: NumPy arrays and numeric scalars (also inside tuples and
    lists) become the caller's arrays; booleans, strings and anything else stay as they are.

    Parameters
    ----------
    out : object
        What the NumPy code returned.
    caller : Caller
        The caller's namespace and device (:func:`caller_of`).

    Returns
    -------
    object
        ``out`` with its numeric arrays in the caller's namespace (a scalar as a 0-d array).
    """
    t = type(out)
    if t is np.ndarray or isinstance(out, np.ndarray):
        return caller.wrap(out) if out.dtype.kind in "fiu" else out
    if t is tuple or t is list:
        return t(from_numpy(o, caller) for o in out)
    if isinstance(out, np.generic) and out.dtype.kind in "fiu":
        return caller.wrap(np.asarray(out))
    return out


def _foreign_call(fn, names, route, self, *args, **kwargs):
    """``fn`` called with its foreign positional array arguments as NumPy arrays, its results
    given back as the caller's arrays; a plain call when no argument is foreign (a type met for
    the first time is classified, then known). When an argument carries a gradient, ``route``
    (``route(caller, self, *args, **kwargs)``, the method's namespace route of
    :mod:`rfl_fast.kernels.xp_routes`) computes in the caller's namespace instead; without one
    (or for an option it does not cover) the argument is refused."""
    args = list(args)
    first = first_name = grad = None
    found = []
    for i, a in enumerate(args):
        t = type(a)
        if t in _NATIVE or not _foreign_type(t):
            continue
        name = names[i] if i < len(names) else f"args[{i}]"
        if grad is None and _carries_gradient(a):
            if route is None:  # before the namespace: the first thing to say about it
                _refuse_gradient(a, name, _what(fn, self))
            grad = (a, name)
        c = _caller(a, name)
        if first is None:
            first, first_name = c, name
        elif not first.same(c):
            raise _mismatch(first, first_name, c, name)
        found.append((i, name, c))
    if first is None:
        return fn(self, *args, **kwargs)
    if grad is not None:
        if first.device is None:  # a tracer first: a concrete argument may name the device
            first = next((c for _, _, c in found if c.device is not None), first)
        try:
            return route(first, self, *args, **kwargs)
        except NoRoute as exc:
            _refuse_gradient(*grad, f"{_what(fn, self)} ({exc})")
    for i, name, c in found:
        args[i] = _host_view(args[i], c._torch is not None and c._host, name)
    return from_numpy(fn(self, *args, **kwargs), first)


#: The one Caller of PyTorch CPU tensors (every tensor type: one namespace, one device)
_torch_cpu = None


def _torch_views(args):
    """The short route of the commonest foreign call, in the wrapper itself (no namespace
    lookup, no per-argument bookkeeping): ``args`` (the positional arguments) with each
    PyTorch CPU tensor as its ``Tensor.numpy`` view (the same memory), or ``None`` when an
    argument is anything else foreign (another namespace, a type not yet classified, a tensor
    inside ``torch.func``, or one ``Tensor.numpy`` refuses: on another device, requiring grad,
    with a conjugate or negative bit, bfloat16, sparse), which the general route takes and
    words."""
    global _torch_cpu
    views = None
    for i, a in enumerate(args):
        t = type(a)
        if t in _NATIVE:
            continue
        if t not in _TORCH or _functorch_wrapped(a):
            return None
        try:
            v = a.numpy()
        except (TypeError, RuntimeError):
            return None
        if views is None:
            views = list(args)
            if _torch_cpu is None:
                try:
                    _torch_cpu = _caller(a, "x")
                except TypeError:  # no array_api_compat: the general route says so
                    return None
        views[i] = v
    return views


def _torch_back(out):
    """The NumPy answer ``out`` of :func:`_torch_views`' call as PyTorch CPU tensors (an array
    shared, not copied)."""
    if type(out) is np.ndarray and out.dtype.kind in "fiu" and out.flags.writeable:
        try:
            return _torch_cpu._torch.from_numpy(out)
        except (ValueError, TypeError, RuntimeError):
            pass  # negative strides, misaligned: wrap copies
    return from_numpy(out, _torch_cpu)


def _what(fn, self):
    if self is None:  # a function (accepts_arrays(..., method=False)): module.name
        return f"{fn.__module__.rpartition('.')[2]}.{fn.__name__}"
    return f"{type(self).__name__}.{fn.__name__}"


def _unbound(fn):
    """A function ``fn(...)`` as the seam calls methods, ``call(None, ...)``; its name and
    module are ``fn``'s (the errors' ``module.name``)."""
    def call(_none, *args, **kwargs):
        return fn(*args, **kwargs)

    call.__name__, call.__module__ = fn.__name__, fn.__module__
    return call


def accepts_arrays(fn: Callable[..., Any], route: Callable[..., Any] | None = None, *,
                   method: bool = True) -> Callable[..., Any]:
    """The method ``fn`` (NumPy in, NumPy out) taking arrays of any array-API namespace.

    The wrapper has ``fn``'s own signature (generated once, so that a NumPy call costs one type
    test per positional argument and no packing of ``*args``/``**kwargs``: ~0.1 us). NumPy
    arrays, Python numbers and other known argument types go straight to ``fn``. A call with
    foreign arrays among the positional parameters runs ``fn`` on NumPy views of them
    (:func:`to_numpy`) and returns its numeric results as the caller's arrays
    (:func:`from_numpy`); errors name the argument (its parameter name, ``parts[i]`` for a
    variadic ``*parts``). Keyword-only parameters (options: ``method``, ``backend``, ``rng``,
    ``atol``) pass unchanged.

    Parameters
    ----------
    fn : callable
        A method ``fn(self, ...)`` of NumPy arrays.
    route : callable, optional
        Its differentiable route, ``route(caller, self, ...)`` with ``fn``'s arguments (a
        :class:`Caller` first), run in the caller's namespace when an argument carries a
        gradient (:mod:`rfl_fast.kernels.xp_routes`); ``None``: such arguments are refused.
    method : bool, optional
        ``False``: ``fn`` is a function, not a method: every positional parameter is an
        argument (the public functions of :mod:`rfl_fast.linalg`); a route then takes
        ``route(caller, None, ...)``, and errors name ``module.function``.

    Returns
    -------
    callable
        The wrapped method (``__wrapped__`` is ``fn``).
    """
    params = list(inspect.signature(fn).parameters.values())
    env = {"_fn": fn, "_native": _NATIVE, "_slow": _foreign_call, "_route": route,
           "_call": fn if method else _unbound(fn), "_views": _torch_views, "_back": _torch_back}
    first = 1 if method else 0  # the first parameter that may be an array (after self)
    head, call, checks, names, star = [], [], [], [], None
    arrays, options = [], []  # the call's positional arguments after self; its keywords
    for i, p in enumerate(params):
        default = ""
        if p.default is not p.empty:
            env[f"_d{i}"] = p.default
            default = f"=_d{i}"
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            head.append(p.name + default)
            call.append(p.name)
            if i >= first:
                checks.append(f"type({p.name}) in _native")
                names.append(p.name)
                arrays.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            head.append("*" + p.name)
            call.append("*" + p.name)
            arrays.append("*" + p.name)
            star = p.name
        elif p.kind is p.KEYWORD_ONLY:
            if star is None and "*" not in head:
                head.append("*")
            head.append(p.name + default)
            call.append(f"{p.name}={p.name}")
            options.append(f"{p.name}={p.name}")
        else:  # **kwargs
            head.append("**" + p.name)
            call.append("**" + p.name)
            options.append("**" + p.name)
    if star is not None:
        checks.append(f"all(type(a) in _native for a in {star})")
        names.extend(f"{star}[{i}]" for i in range(64))
    env["_names"] = tuple(names)
    this = [call[0]] if method else []
    src = (f"def _method({', '.join(head)}):\n"
           f"    if {' and '.join(checks) or 'True'}:\n"
           f"        return _fn({', '.join(call)})\n"
           f"    _v = _views(({''.join(a + ', ' for a in arrays)}))\n"
           f"    if _v is not None:\n"
           f"        return _back(_fn({', '.join(this + ['*_v'] + options)}))\n"
           f"    return _slow(_call, _names, _route, {'' if method else 'None, '}"
           f"{', '.join(call)})\n")
    exec(_compiled(src), env)
    return functools.update_wrapper(env["_method"], fn)


@functools.cache
def _compiled(src):
    """The code of a wrapper's source, compiled once per parameter list (the manifolds' 168
    wrapped methods share a few dozen; compiling each took about 0.1 s of every process's
    import, a Flower ClientApp's among them)."""
    return compile(src, "<accepts_arrays>", "exec")
