"""Counts that depend on the test tier (``tests/conftest.py``): a fuzzer, property test or
repeated run takes ``count(fast, full)`` examples, ``fast`` in the fast tier a plain
``pytest`` runs and ``full`` under ``pytest --full`` (which sets ``RFL_FAST_FULL_TESTS=1``
before the test modules load, for the tests and the subprocesses they start)."""

import os

__all__ = ["FULL", "count"]

#: Whether this session runs the full tier.
FULL = os.environ.get("RFL_FAST_FULL_TESTS", "") not in ("", "0")


def count(fast, full):
    """``full`` in the full tier, else ``fast``."""
    return full if FULL else fast
