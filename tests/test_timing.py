"""The timing harness of the benchmarks and the shape sweep, on a virtual clock: which calls it
makes, in which order, and which it times."""

import pytest

from rfl_fast.app import timing


class VirtualClock:
    """``time.perf_counter`` for ``timing``: advanced only by the fake routes' calls, which are
    logged in order."""

    def __init__(self):
        self.now, self.log = 0.0, []

    def perf_counter(self):
        return self.now

    def route(self, key, seconds):
        def call():
            self.log.append(key)
            self.now += seconds
        return call, ()


@pytest.fixture
def clock(monkeypatch):
    c = VirtualClock()
    monkeypatch.setattr(timing, "time", c)
    return c


def test_fast_routes_warm_up_then_time_a_block_alternating(clock):
    calls = {"a": clock.route("a", 1 / 32), "b": clock.route("b", 1 / 64)}
    med = timing.block_medians(calls, repeats=2)
    assert med == pytest.approx({"a": 1 / 32, "b": 1 / 64})
    # per block: warm-up calls until WARMUP_S = 0.1 s has passed (4 of 1/32 s, 7 of 1/64 s),
    # then BLOCK_CALLS timed ones; the routes alternate block by block
    assert timing.WARMUP_S == 0.1
    block_a, block_b = ["a"] * (4 + timing.BLOCK_CALLS), ["b"] * (7 + timing.BLOCK_CALLS)
    assert clock.log == (block_a + block_b) * 2


def test_a_slow_route_is_timed_right_after_an_untimed_call_of_its_own(clock):
    """A 0.375 s route: every timed call follows an untimed one of the same route, never directly
    another route's block, and it is timed in max(3, repeats // 2) repeats."""
    calls = {"fast": clock.route("fast", 0.0625), "slow": clock.route("slow", 0.375)}
    med = timing.block_medians(calls, repeats=6, once=("slow",))
    assert med == pytest.approx({"fast": 0.0625, "slow": 0.375})
    fast_block = ["fast"] * (2 + timing.BLOCK_CALLS)  # 2 warm-up calls of 1/16 s
    assert clock.log == (fast_block + ["slow", "slow"]) * 3 + fast_block * 3


def test_a_very_slow_route_is_timed_within_its_budget(clock):
    """A 6 s route: untimed once before its first timed call, then timed without a warm-up
    call, and no more once its timed calls add up to ONCE_BUDGET_S (10 s): two timed calls."""
    assert timing.ONCE_WARM_MAX_S < 6 < timing.ONCE_BUDGET_S < 12
    calls = {"fast": clock.route("fast", 0.0625), "big": clock.route("big", 6.0)}
    med = timing.block_medians(calls, repeats=5, once=("big",))
    assert med == pytest.approx({"fast": 0.0625, "big": 6.0})
    assert clock.log.count("big") == 3
    fast_block = ["fast"] * (2 + timing.BLOCK_CALLS)
    assert clock.log == (fast_block + ["big", "big"] + fast_block + ["big"]
                         + fast_block * 3)


def test_calls_the_caller_timed_count_towards_a_slow_routes_calls_and_budget(clock):
    """The sweep's first timed call of a 6 s route (made right after its own warm-up call) is
    one of its samples: one more timed call reaches the budget, and no untimed one precedes it
    (the last took over ONCE_WARM_MAX_S)."""
    calls = {"fast": clock.route("fast", 0.0625), "big": clock.route("big", 6.0)}
    med = timing.block_medians(calls, repeats=5, once=("big",), timed={"big": [5.0]})
    assert med["big"] == pytest.approx(5.5)   # median of the given 5.0 and the timed 6.0
    fast_block = ["fast"] * (2 + timing.BLOCK_CALLS)
    assert clock.log == fast_block + ["big"] + fast_block * 4
