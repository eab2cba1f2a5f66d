"""A data-only reader of pickle files: parses the opcodes, never imports or calls anything.

:func:`parse` runs a small stack machine over the binary pickle opcodes (protocols 2-5) that
plain data needs -- ints, floats, bytes, str, None/bools, lists, tuples, dicts, the memo --
and turns the few references to other objects that numpy-array pickles contain into inert
records (:class:`Global`, :class:`Call`): a name is only a pair of strings and a "call" only a
record of its arguments and state. Nothing named by the file is looked up, imported,
instantiated or executed; the caller decides what a record means (see
:func:`uint8_matrix`). The one call evaluated here is ``_codecs.encode(s, "latin1")``, which
Python 3 writes for ``bytes`` at protocol 2, computed as ``s.encode("latin1")``.

Bounded by construction, so that a file costs at most a fixed multiple of its size and never
crashes the interpreter:

* every length read from the file is checked against the bytes left before it is used, so a
  declared size cannot make the reader allocate more than the file holds; each opcode adds at
  most one object or reference, and ``MARK`` scans are amortized over the items they consume;
* dict keys are scalars only (str, bytes, int, float, bool, None): no container is ever hashed
  (CPython hashes nested tuples recursively, without a depth check: a key nested 300 000 deep
  overflows the C stack) and list keys are refused instead of raising ``TypeError``;
* before :func:`parse` returns, the value's nesting is measured without recursion (heights of
  shared objects memoized, so memo references cost nothing extra) and refused above
  :data:`MAX_DEPTH` levels or when it is cyclic, so no caller ever walks a deep structure;
* error texts show values through :func:`rfl_fast._validation.brief`: bounded.

Any other opcode, a global outside :data:`GLOBALS`, or a malformed stream raises
:class:`PickleRefused`.
"""

import struct

import numpy as np

from .._validation import brief

__all__ = ["parse", "Global", "Call", "PickleRefused", "GLOBALS", "MAX_DEPTH", "uint8_matrix"]

#: Deepest nesting of containers (lists, tuples, dicts, records) a data pickle may hold; a
#: CIFAR-10 batch needs 6 (dict -> ndarray record -> state tuple -> dtype record -> its
#: arguments).
MAX_DEPTH = 32

#: The only names a data pickle may mention (numpy array reconstruction, py3 bytes at protocol 2).
GLOBALS = {
    ("_codecs", "encode"),
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
}


class PickleRefused(ValueError):
    """The file is not a data-only pickle of the supported kind."""


class Global:
    """An inert reference ``module.name`` (never imported)."""

    __slots__ = ("module", "name")

    def __init__(self, module, name):
        if (module, name) not in GLOBALS:
            raise PickleRefused(f"refusing to load {brief(module)}.{brief(name)} from a data "
                                f"file")
        self.module, self.name = module, name


class Call:
    """An inert record of ``func(*args)`` and its BUILD ``state`` (never called)."""

    __slots__ = ("func", "args", "state")

    def __init__(self, func, args):
        self.func, self.args, self.state = func, args, None


_MARK = object()
_KEY_TYPES = (str, bytes, int, float, bool, type(None))


def _key(k):
    """``k`` if it may be a dict key of data (a scalar: never hashed recursively)."""
    if not isinstance(k, _KEY_TYPES):
        raise PickleRefused(f"dict key of type {type(k).__name__}: data keys are strings, "
                            f"bytes or numbers")
    return k


def _children(obj):
    if isinstance(obj, (list, tuple)):
        return obj
    if isinstance(obj, dict):
        return obj.values()                     # keys are scalars (_key)
    if isinstance(obj, Call):
        return (obj.args, obj.state)
    return ()


def _check_nesting(root):
    """Refuse a value nested deeper than :data:`MAX_DEPTH` or cyclic, without recursion: a
    depth-first walk whose path is an explicit stack, each container's height memoized by
    identity (a memo reference is measured once)."""
    height = {}              # id -> height of a finished container (all alive: ids unique)
    on_path = set()
    stack = [(root, iter(_children(root)), 0)]
    on_path.add(id(root))
    while stack:
        obj, it, h = stack[-1]
        child = next(it, _MARK)
        if child is _MARK:
            stack.pop()
            on_path.discard(id(obj))
            height[id(obj)] = h + 1
            if stack:
                parent, pit, ph = stack[-1]
                stack[-1] = (parent, pit, max(ph, h + 1))
            continue
        if not isinstance(child, (list, tuple, dict, Call)):
            continue
        if id(child) in on_path:
            raise PickleRefused("the value contains itself (a cycle); data is a tree")
        if id(child) in height:
            sub = height[id(child)]
            if len(stack) + sub > MAX_DEPTH:
                raise PickleRefused(f"nested deeper than {MAX_DEPTH} levels")
            stack[-1] = (obj, it, max(h, sub))
            continue
        if len(stack) >= MAX_DEPTH:
            raise PickleRefused(f"nested deeper than {MAX_DEPTH} levels")
        on_path.add(id(child))
        stack.append((child, iter(_children(child)), 0))


def _encode(func, args):
    if func.module == "_codecs" and func.name == "encode":
        if (len(args) == 2 and isinstance(args[0], str) and args[1] in ("latin1", "latin-1")):
            return args[0].encode("latin1")
        raise PickleRefused("_codecs.encode: only (str, 'latin1') is data")
    return Call(func, args)


def parse(raw):
    """The value pickled in ``raw`` (bytes), with :class:`Global` / :class:`Call` records.

    Raises
    ------
    PickleRefused
        Unsupported opcode or global, truncated or malformed stream.
    """
    mv = memoryview(raw)
    n, pos = len(raw), 0
    stack, memo = [], {}

    def take(k):
        nonlocal pos
        if k < 0 or pos + k > n:
            raise PickleRefused(f"truncated: an item of {k} bytes at offset {pos}, "
                                f"{n - pos} bytes left")
        out = mv[pos:pos + k]
        pos += k
        return out

    def uint(k, fmt):
        return struct.unpack(fmt, take(k))[0]

    def pop_mark():
        for i in range(len(stack) - 1, -1, -1):
            if stack[i] is _MARK:
                items = stack[i + 1:]
                del stack[i:]
                return items
        raise PickleRefused("MARK missing")

    def pop():
        if not stack or stack[-1] is _MARK:
            raise PickleRefused("stack underflow")
        return stack.pop()

    def line():
        nonlocal pos
        end = raw.find(b"\n", pos)
        if end < 0:
            raise PickleRefused("truncated text line")
        try:
            s = bytes(mv[pos:end]).decode("ascii")
        except UnicodeDecodeError:
            raise PickleRefused("a GLOBAL name that is not ASCII") from None
        pos = end + 1
        return s

    while True:
        op = bytes(take(1))
        if op == b"\x80":                                  # PROTO
            if not 2 <= uint(1, "<B") <= 5:
                raise PickleRefused("unsupported pickle protocol")
        elif op == b"\x95":                                # FRAME (size only)
            uint(8, "<Q")
        elif op == b".":                                   # STOP
            if len(stack) != 1 or stack[0] is _MARK:
                raise PickleRefused("malformed stream at STOP")
            _check_nesting(stack[0])
            return stack[0]
        elif op == b"(":
            stack.append(_MARK)
        elif op == b"}":
            stack.append({})
        elif op == b"]":
            stack.append([])
        elif op == b")":
            stack.append(())
        elif op == b"t":
            stack.append(tuple(pop_mark()))
        elif op in (b"\x85", b"\x86", b"\x87"):           # TUPLE1..3
            k = {b"\x85": 1, b"\x86": 2, b"\x87": 3}[op]
            items = [pop() for _ in range(k)][::-1]
            stack.append(tuple(items))
        elif op == b"l":
            stack.append(list(pop_mark()))
        elif op == b"d":
            items = pop_mark()
            if len(items) % 2:
                raise PickleRefused("DICT with an odd number of items")
            stack.append({_key(k): v for k, v in zip(items[::2], items[1::2])})
        elif op in (b"a", b"e"):                           # APPEND, APPENDS
            items = [pop()] if op == b"a" else pop_mark()
            target = pop()
            if not isinstance(target, list):
                raise PickleRefused("APPEND to a non-list")
            target.extend(items)
            stack.append(target)
        elif op in (b"s", b"u"):                           # SETITEM, SETITEMS
            if op == b"s":
                v = pop()
                items = [pop(), v]
            else:
                items = pop_mark()
            target = pop()
            if not isinstance(target, dict) or len(items) % 2:
                raise PickleRefused("SETITEM on a non-dict")
            for k, v in zip(items[::2], items[1::2]):
                target[_key(k)] = v
            stack.append(target)
        elif op == b"J":
            stack.append(uint(4, "<i"))
        elif op == b"K":
            stack.append(uint(1, "<B"))
        elif op == b"M":
            stack.append(uint(2, "<H"))
        elif op == b"\x8a":                                # LONG1
            k = uint(1, "<B")
            stack.append(int.from_bytes(take(k), "little", signed=True))
        elif op == b"G":
            stack.append(uint(8, ">d"))
        elif op == b"N":
            stack.append(None)
        elif op == b"\x88":
            stack.append(True)
        elif op == b"\x89":
            stack.append(False)
        elif op in (b"X", b"\x8c", b"\x8d"):               # BINUNICODE, SHORT_, 8
            k = uint(*{b"X": (4, "<I"), b"\x8c": (1, "<B"), b"\x8d": (8, "<Q")}[op])
            try:
                stack.append(str(take(k), "utf-8", "surrogatepass"))
            except UnicodeDecodeError:
                raise PickleRefused("invalid UTF-8 string") from None
        elif op in (b"T", b"U", b"B", b"C", b"\x8e", b"\x96"):  # py2 str, bytes, bytearray
            k = uint(*{b"T": (4, "<i"), b"U": (1, "<B"), b"B": (4, "<I"), b"C": (1, "<B"),
                       b"\x8e": (8, "<Q"), b"\x96": (8, "<Q")}[op])
            stack.append(bytes(take(k)))
        elif op in (b"q", b"r", b"\x94"):                  # BINPUT, LONG_BINPUT, MEMOIZE
            key = len(memo) if op == b"\x94" else uint(*{b"q": (1, "<B"),
                                                        b"r": (4, "<I")}[op])
            if not stack or stack[-1] is _MARK:
                raise PickleRefused("memo of an empty stack or a MARK")
            memo[key] = stack[-1]
        elif op in (b"h", b"j"):                           # BINGET, LONG_BINGET
            key = uint(*{b"h": (1, "<B"), b"j": (4, "<I")}[op])
            if key not in memo:
                raise PickleRefused(f"memo key {key} missing")
            stack.append(memo[key])
        elif op == b"c":                                   # GLOBAL
            stack.append(Global(line(), line()))
        elif op == b"\x93":                                # STACK_GLOBAL
            name, module = pop(), pop()
            if not (isinstance(module, str) and isinstance(name, str)):
                raise PickleRefused("STACK_GLOBAL needs two strings")
            stack.append(Global(module, name))
        elif op == b"R":                                   # REDUCE: an inert record
            args, func = pop(), pop()
            if not isinstance(func, Global) or not isinstance(args, tuple):
                raise PickleRefused("REDUCE of something not a known global")
            stack.append(_encode(func, args))
        elif op == b"b":                                   # BUILD: recorded state
            state = pop()
            target = stack[-1] if stack else None
            if not isinstance(target, Call) or target.state is not None:
                raise PickleRefused("BUILD on something not a recorded call")
            target.state = state
        else:
            raise PickleRefused(f"unsupported pickle opcode {op!r} at offset {pos - 1}")


def _is(obj, names):
    return isinstance(obj, Global) and (obj.module, obj.name) in names


def _uint8_dtype(dt):
    return (isinstance(dt, Call) and _is(dt.func, {("numpy", "dtype")})
            and dt.args[:1] in (("u1",), ("|u1",))
            and (dt.state is None or (isinstance(dt.state, tuple) and len(dt.state) >= 2
                                      and dt.state[1] in ("|", b"|"))))


def _matrix(shape, data, what):
    if not (isinstance(shape, tuple) and len(shape) == 2
            and all(type(v) is int and v >= 0 for v in shape)):
        raise PickleRefused(f"{what}: expected a 2-d shape, got {brief(shape)}")
    if not isinstance(data, bytes):
        raise PickleRefused(f"{what}: expected raw bytes")
    if len(data) != shape[0] * shape[1]:
        raise PickleRefused(f"{what}: declared shape {shape} needs {shape[0] * shape[1]} "
                            f"bytes, the file holds {len(data)}")
    return np.frombuffer(data, dtype=np.uint8).reshape(shape).copy()


def uint8_matrix(obj, what):
    """A (m, k) uint8 ndarray from the record of a pickled numpy uint8 C-order array, or from
    a list of equal-length ``bytes`` / int lists; ``PickleRefused`` otherwise. The shape the
    record declares must match its raw bytes exactly (no allocation from a declared size)."""
    if isinstance(obj, Call) and _is(obj.func, {("numpy.core.multiarray", "_reconstruct"),
                                                ("numpy._core.multiarray", "_reconstruct")}):
        args, st = obj.args, obj.state
        if not (len(args) == 3 and _is(args[0], {("numpy", "ndarray")})
                and args[1] == (0,) and args[2] in (b"b", "b")):
            raise PickleRefused(f"{what}: not a plain ndarray record")
        if not (isinstance(st, tuple) and len(st) == 5 and st[0] == 1):
            raise PickleRefused(f"{what}: unknown ndarray state")
        _, shape, dt, fortran, data = st
        if not _uint8_dtype(dt):
            raise PickleRefused(f"{what}: dtype is not uint8")
        if fortran is not False:
            raise PickleRefused(f"{what}: expected C order")
        return _matrix(shape, data, what)
    if isinstance(obj, Call) and _is(obj.func, {("numpy.core.numeric", "_frombuffer"),
                                                ("numpy._core.numeric", "_frombuffer")}):
        args = obj.args                                    # protocol 5: (buf, dtype, shape, order)
        if not (len(args) == 4 and _uint8_dtype(args[1]) and args[3] == "C"
                and obj.state is None):
            raise PickleRefused(f"{what}: not a C-order uint8 buffer record")
        return _matrix(args[2], args[0], what)
    if isinstance(obj, list) and obj and all(isinstance(r, (bytes, list)) for r in obj):
        if len({id(r) for r in obj}) != len(obj):
            # a memo reference repeats a row for 2 bytes of file: m shared rows would allocate
            # m x 3072 bytes from a file holding one (a real batch never shares a row)
            raise PickleRefused(f"{what}: rows shared by memo references (each row must be "
                                f"its own bytes in the file)")
        rows = [np.frombuffer(r, np.uint8) if isinstance(r, bytes) else _int_row(r, what)
                for r in obj]
        if len({r.size for r in rows}) != 1:
            raise PickleRefused(f"{what}: rows of different lengths")
        return np.stack(rows)
    raise PickleRefused(f"{what}: expected a uint8 array, got {type(obj).__name__}")


def _int_row(r, what):
    if not all(type(v) is int and 0 <= v <= 255 for v in r):
        raise PickleRefused(f"{what}: a row holds values other than ints 0..255")
    return np.array(r, dtype=np.uint8)
