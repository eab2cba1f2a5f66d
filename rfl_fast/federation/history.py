"""Per-round records of a federated run: :class:`History`.

Row 0 describes the initial point (metrics only, zero accounting); row ``t`` (``t >= 1``) the
state after round ``t``. Metric columns hold NaN on rows where metrics were not computed
(``metrics_every > 1``) or do not apply (``angle`` outside Stiefel problems). The column
``n_rejected`` counts the clients left out of a round, ``meta["rejected"]`` lists them as
``[round, client, reason]``.
"""

import csv
import json
import math

import numpy as np

__all__ = ["History", "BASE_COLUMNS", "INT_COLUMNS"]

#: Columns every history has, in order; problem metrics beyond these are appended.
BASE_COLUMNS = ("round", "grad_norm", "f_gap", "angle", "dist", "cpu_server", "cpu_clients_max",
                "wall", "wall_metrics", "floats_up", "floats_down", "bytes_up", "bytes_down",
                "n_participants", "n_rejected")
#: Columns stored as integers.
INT_COLUMNS = frozenset({"round", "floats_up", "floats_down", "bytes_up", "bytes_down",
                         "n_participants", "n_rejected"})


class History:
    """Columns of per-round values.

    Access a column as ``h["grad_norm"]`` or ``h.grad_norm`` (an ndarray, float64 or int64);
    ``len(h)`` is the number of rows; ``h.columns`` the column names in order.

    Parameters
    ----------
    columns : dict of str to sequence
        Equal-length columns.
    meta : dict, optional
        JSON-able description of the run (algorithm, participation, seed, ...).
    """

    def __init__(self, columns=None, meta=None):
        self._cols = {}
        self.meta = dict(meta or {})
        n = None
        for name, values in (columns or {}).items():
            arr = np.asarray(values, dtype=np.int64 if name in INT_COLUMNS else np.float64)
            if n is not None and arr.shape != (n,):
                raise ValueError(f"column {name!r}: expected {n} rows, got shape {arr.shape}")
            n = arr.shape[0]
            self._cols[name] = arr
        self._rows = [] if n is None else None

    # ------------------------------------------------------------------ building (engine)

    @classmethod
    def _building(cls, columns, meta=None):
        h = cls(meta=meta)
        h._cols = {c: [] for c in columns}
        h._rows = []
        return h

    def _append(self, row):
        """Append one row (dict); missing columns get NaN (float) or 0 (int)."""
        for name, values in self._cols.items():
            default = 0 if name in INT_COLUMNS else math.nan
            values.append(row.get(name, default))

    def _freeze(self):
        self._cols = {name: np.asarray(v, dtype=np.int64 if name in INT_COLUMNS else np.float64)
                      for name, v in self._cols.items()}
        self._rows = None
        return self

    # ------------------------------------------------------------------ access

    @property
    def columns(self):
        return tuple(self._cols)

    def __len__(self):
        return len(next(iter(self._cols.values()))) if self._cols else 0

    def __getitem__(self, name):
        try:
            return self._cols[name]
        except KeyError:
            raise KeyError(f"no column {name!r}; columns are {self.columns}") from None

    def __getattr__(self, name):
        cols = self.__dict__.get("_cols", {})
        if name in cols:
            return cols[name]
        raise AttributeError(f"History has no attribute or column {name!r}")

    def __contains__(self, name):
        return name in self._cols

    def __repr__(self):
        return f"History({len(self)} rows, columns={list(self.columns)})"

    def __eq__(self, other):
        """Bit-identical columns (NaN equal to NaN), ignoring timing columns is up to the
        caller; see :meth:`equal`."""
        return isinstance(other, History) and self.equal(other)

    __hash__ = None

    def equal(self, other, ignore=()):
        """Whether every column except ``ignore`` is bit-identical (NaN matches NaN).

        Parameters
        ----------
        other : History
        ignore : iterable of str
            Column names left out (e.g. the timing columns).

        Returns
        -------
        bool
        """
        mine = [c for c in self.columns if c not in ignore]
        theirs = [c for c in other.columns if c not in ignore]
        if mine != theirs:
            return False
        return all(np.array_equal(self[c], other[c], equal_nan=self[c].dtype.kind == "f")
                   for c in mine)

    def last(self, name):
        """The last non-NaN value of a column (NaN if there is none).

        Parameters
        ----------
        name : str
            Column name.

        Returns
        -------
        float or int
        """
        col = self[name]
        ok = np.flatnonzero(~np.isnan(col)) if col.dtype.kind == "f" else np.arange(col.size)
        return col[ok[-1]] if ok.size else math.nan

    def totals(self):
        """Sums of the accounting columns over all rounds (dict)."""
        names = ("cpu_server", "cpu_clients_max", "wall", "floats_up", "floats_down",
                 "bytes_up", "bytes_down")
        return {n: self[n].sum().item() for n in names if n in self}

    # ------------------------------------------------------------------ conversion

    def as_dict(self):
        """Columns as plain Python lists (NaN stays ``float('nan')``)."""
        return {name: col.tolist() for name, col in self._cols.items()}

    def to_json(self, path):
        """Write ``{"meta": ..., "columns": {...}}``; NaN is written as ``null``, infinities
        as ``"inf"`` and ``"-inf"`` (e.g. a privacy spent no accountant bounds).

        Parameters
        ----------
        path : str or os.PathLike
            The JSON file (overwritten).
        """
        def plain(v):
            if isinstance(v, float) and not math.isfinite(v):
                return None if math.isnan(v) else str(v)
            return v

        cols = {name: [plain(v) for v in values] for name, values in self.as_dict().items()}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"meta": self.meta, "columns": cols}, fh, allow_nan=False)

    @classmethod
    def from_json(cls, path):
        """Read a history :meth:`to_json` wrote.

        Parameters
        ----------
        path : str or os.PathLike

        Returns
        -------
        History
        """
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        cols = {name: [math.nan if v is None else float(v) if isinstance(v, str) else v
                       for v in values] for name, values in data["columns"].items()}
        return cls(cols, meta=data.get("meta"))

    def to_csv(self, path):
        """Write one header line and one line per round; floats with ``repr`` precision
        (17 significant digits, so reading back is exact), NaN as ``nan``.

        Parameters
        ----------
        path : str or os.PathLike
            The CSV file (overwritten).
        """
        names = self.columns
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(names)
            for row in zip(*(self._cols[n].tolist() for n in names)):
                w.writerow([repr(v) for v in row])

    @classmethod
    def from_csv(cls, path):
        """Read a history :meth:`to_csv` wrote (the columns only; CSV has no ``meta``).

        Parameters
        ----------
        path : str or os.PathLike

        Returns
        -------
        History
        """
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        names, body = rows[0], rows[1:]
        cols = {n: [int(r[j]) if n in INT_COLUMNS else float(r[j]) for r in body]
                for j, n in enumerate(names)}
        return cls(cols)
