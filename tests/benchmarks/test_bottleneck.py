"""``benchmarks/bottleneck.py``: what limited an edge benchmark row, from ``/proc`` numbers.

The verdicts decide how ``docs/benchmarks.md`` reads every ratio between proxies, so they are
tested from numbers (no benchmark is run and nothing is timed): the ``/proc`` parsing, the
split of each CPU's time between the proxy, the load side and other processes, and the verdict
and reading that follow.
"""

from __future__ import annotations

import os

import pytest

from benchmarks.bottleneck import (
    BOTH,
    CEILING,
    LOAD_BOUND,
    NEITHER,
    PROXY_BOUND,
    SHARED_BOUND,
    TICKS_PER_SECOND,
    CpuTicks,
    Roles,
    Side,
    Usage,
    Verdict,
    descendants,
    headroom_rule,
    measure_usage,
    median_usage,
    parse_pid_stat,
    parse_proc_stat,
    ratio_reading,
    verdict,
)

PROC_STAT = """\
cpu  35489 56338 23017 44273 545 0 6596 2251 0 0
cpu0 13384 27519 12368 26730 72 0 2632 1028 0 0
cpu1 22104 28818 10649 17543 473 0 3963 1223 0 0
intr 123 4 5
ctxt 99
"""


def test_proc_stat_per_cpu_busy_counts_steal_and_total_counts_idle_and_iowait() -> None:
    cpus = parse_proc_stat(PROC_STAT)
    assert set(cpus) == {0, 1}  # the "cpu" total line and the other lines are not CPUs
    assert cpus[0] == CpuTicks(busy=13384 + 27519 + 12368 + 2632 + 1028, total=83733)
    assert cpus[1].total - cpus[1].busy == 17543 + 473


def test_proc_stat_without_steal_column() -> None:
    assert parse_proc_stat("cpu0 1 2 3 4 5 6 7\n") == {0: CpuTicks(busy=19, total=28)}


def test_pid_stat_with_spaces_and_parentheses_in_the_command_name() -> None:
    fields = ["S", "77"] + ["0"] * 9 + ["1500", "250"] + ["0"] * 30
    text = "4242 (nginx: worker (x) 1) " + " ".join(fields) + "\n"
    parsed = parse_pid_stat(text)
    assert (parsed.pid, parsed.ppid, parsed.ticks) == (4242, 77, 1750)


def test_pid_stat_of_this_process() -> None:
    with open("/proc/self/stat") as stat:
        parsed = parse_pid_stat(stat.read())
    assert parsed.pid == os.getpid()
    assert parsed.ppid == os.getppid()
    assert parsed.ticks >= 0


def test_descendants_follow_every_generation_and_nothing_else() -> None:
    parents = {10: 1, 11: 10, 12: 11, 13: 10, 20: 1, 21: 20}
    assert descendants(parents, [10]) == {10, 11, 12, 13}
    assert descendants(parents, [12, 21]) == {12, 21}


# ---- splitting the CPU -------------------------------------------------------------------------

T = 400  # ticks per CPU in a window (4 s at 100 Hz)
PROXY, BACKEND, OTHER_PROXY = 100, 200, 300
PINNED = Roles(
    proxy=frozenset({PROXY}),
    proxy_cpus=frozenset({1}),
    proxy_cores=1,
    backend=frozenset({BACKEND}),
    generator_cpus=frozenset({0}),
)
AFFINITY = {PROXY: frozenset({1}), OTHER_PROXY: frozenset({1}), BACKEND: frozenset({0})}


def split(
    cpu0_busy: int,
    cpu1_busy: int,
    proxy: int,
    backend: int,
    generator: float,
    roles: Roles = PINNED,
    other_proxy: int = 0,
) -> Usage:
    return measure_usage(
        {0: CpuTicks(cpu0_busy, T), 1: CpuTicks(cpu1_busy, T)},
        {PROXY: proxy, BACKEND: backend, OTHER_PROXY: other_proxy},
        AFFINITY,
        generator,
        roles,
    )


def test_a_proxy_alone_on_its_saturated_cpu() -> None:
    usage = split(cpu0_busy=240, cpu1_busy=396, proxy=392, backend=90, generator=150)
    assert usage.proxy is not None
    assert usage.proxy.own == pytest.approx(392 / T)
    assert usage.proxy.busy == pytest.approx(396 / T)
    assert usage.proxy.foreign == pytest.approx(4 / T)
    assert usage.proxy.seconds == pytest.approx(392 / TICKS_PER_SECOND)
    assert usage.load.own == pytest.approx(240 / T)
    assert usage.load.foreign == 0
    assert not usage.shared
    assert verdict(usage) == Verdict(PROXY_BOUND, marked=False)


def test_the_benchmarks_idle_proxies_on_the_proxy_cpu_are_not_foreign() -> None:
    usage = split(
        cpu0_busy=240, cpu1_busy=396, proxy=376, backend=90, generator=150, other_proxy=16
    )
    assert usage.proxy is not None
    assert usage.proxy.foreign == pytest.approx(4 / T)
    assert not verdict(usage).marked


def test_other_processes_taking_the_proxy_cpu_mark_the_row() -> None:
    # The CPU was full, but a quarter of it was not the proxy's: the proxy did not saturate it.
    usage = split(cpu0_busy=240, cpu1_busy=400, proxy=300, backend=90, generator=150)
    assert usage.proxy is not None
    assert usage.proxy.foreign == pytest.approx(100 / T)
    assert verdict(usage) == Verdict(NEITHER, marked=True)
    assert verdict(usage).describe() == "neither saturated (marked: foreign load)"


def test_a_little_foreign_use_of_a_saturated_proxy_cpu_marks_a_proxy_bound_row() -> None:
    usage = split(cpu0_busy=240, cpu1_busy=400, proxy=370, backend=90, generator=150)
    assert verdict(usage) == Verdict(PROXY_BOUND, marked=True)


def test_a_fast_proxy_limited_by_wrk_and_the_backend() -> None:
    usage = split(cpu0_busy=398, cpu1_busy=300, proxy=300, backend=180, generator=218)
    assert usage.load.own == pytest.approx(398 / T)
    assert verdict(usage) == Verdict(LOAD_BOUND, marked=False)


def test_a_filler_on_the_load_cpu_does_not_saturate_the_load_side() -> None:
    # A niced build fills what wrk and the backend leave idle: the CPU is busy, they are not.
    usage = split(cpu0_busy=396, cpu1_busy=396, proxy=396, backend=100, generator=100)
    assert usage.load.own == pytest.approx(200 / T)
    assert usage.load.busy == pytest.approx(396 / T)
    assert usage.load.foreign == pytest.approx(196 / T)
    assert verdict(usage) == Verdict(PROXY_BOUND, marked=False)


def test_both_sides_saturated() -> None:
    usage = split(cpu0_busy=398, cpu1_busy=398, proxy=396, backend=200, generator=198)
    assert verdict(usage).limit == BOTH


def test_wrk_saturating_its_own_cpu_saturates_the_load_side() -> None:
    # Three CPUs: wrk alone on CPU 0, the backend on CPU 2, the proxy on CPU 1.
    roles = Roles(frozenset({PROXY}), frozenset({1}), 1, frozenset({BACKEND}), frozenset({0}))
    usage = measure_usage(
        {0: CpuTicks(396, T), 1: CpuTicks(300, T), 2: CpuTicks(200, T)},
        {PROXY: 300, BACKEND: 200},
        {PROXY: frozenset({1}), BACKEND: frozenset({2})},
        396,
        roles,
    )
    assert usage.load.own == pytest.approx(396 / T)  # wrk's one core, not (396 + 200) / 2
    assert verdict(usage).limit == LOAD_BOUND


def test_neither_side_saturated() -> None:
    usage = split(cpu0_busy=200, cpu1_busy=200, proxy=200, backend=100, generator=100)
    assert verdict(usage).limit == NEITHER


def test_the_backend_called_directly_has_no_proxy_side() -> None:
    roles = Roles(frozenset(), frozenset({1}), 1, frozenset({BACKEND}), frozenset({0}))
    usage = split(cpu0_busy=400, cpu1_busy=10, proxy=0, backend=250, generator=150, roles=roles)
    assert usage.proxy is None
    assert usage.load.own == pytest.approx(1.0)
    assert verdict(usage) == Verdict(CEILING, marked=False)


def test_workers_on_the_load_cpu_share_it() -> None:
    roles = Roles(frozenset({PROXY}), frozenset({0, 1}), 2, frozenset({BACKEND}), frozenset({0}))
    usage = measure_usage(
        {0: CpuTicks(400, T), 1: CpuTicks(400, T)},
        {PROXY: 500, BACKEND: 150},
        {PROXY: frozenset({0, 1}), BACKEND: frozenset({0})},
        150,
        roles,
    )
    assert usage.shared
    assert usage.proxy is not None
    assert usage.proxy.own == pytest.approx(500 / (2 * T))
    assert usage.proxy.foreign == 0
    # The workers' time on CPU 0 is the benchmark's, not foreign to the load side.
    assert usage.load.foreign == 0
    assert usage.load.own == pytest.approx(300 / T)
    assert verdict(usage).limit == SHARED_BOUND


def test_unpinned_everything_shares_every_cpu() -> None:
    roles = Roles(frozenset({PROXY}), frozenset(), 1, frozenset({BACKEND}), frozenset())
    usage = measure_usage(
        {0: CpuTicks(380, T), 1: CpuTicks(380, T)},
        {PROXY: 380, BACKEND: 200},
        {PROXY: frozenset({0, 1}), BACKEND: frozenset({0, 1})},
        160,
        roles,
    )
    assert usage.shared
    assert usage.proxy is not None
    assert usage.proxy.own == pytest.approx(380 / T)  # one worker: one CPU's worth
    assert usage.proxy.foreign == pytest.approx(20 / (2 * T))


# ---- verdicts and readings ---------------------------------------------------------------------


def side(own: float, busy: float, foreign: float = 0.0) -> Side:
    return Side(own=own, busy=busy, foreign=foreign, seconds=own * 4)


def test_saturated_at_ninety_percent() -> None:
    at = Usage(proxy=side(0.9, 0.9), load=side(0.5, 0.89), shared=False)
    under = Usage(proxy=side(0.89, 0.89), load=side(0.5, 0.89), shared=False)
    assert verdict(at).limit == PROXY_BOUND
    assert verdict(under).limit == NEITHER


def test_the_median_round_decides() -> None:
    rounds = [
        Usage(proxy=side(0.97, 0.99), load=side(0.6, 0.6), shared=False),
        Usage(proxy=side(0.50, 0.99, 0.49), load=side(0.3, 0.3), shared=False),
        Usage(proxy=side(0.96, 0.98), load=side(0.7, 0.7), shared=False),
    ]
    middle = median_usage(rounds)
    assert middle.proxy == side(0.96, 0.99, 0.0)
    assert verdict(middle) == Verdict(PROXY_BOUND, marked=False)


def test_ratio_readings() -> None:
    proxy, load = Verdict(PROXY_BOUND, False), Verdict(LOAD_BOUND, False)
    assert ratio_reading(proxy, proxy).startswith("both proxy-bound: the ratio")
    assert "foreign" in ratio_reading(proxy, Verdict(PROXY_BOUND, True))
    assert ratio_reading(proxy, load).startswith("an upper bound")
    assert ratio_reading(load, proxy).startswith("a lower bound")
    assert ratio_reading(load, load).startswith("not a ratio of capacities")


def test_headroom_rule_is_stated_met_or_not() -> None:
    proxies = {"nginx": 49_454.0, "edge": 10_436.0}
    assert headroom_rule(96_239.0, proxies, 3.0).endswith("3x rule not met")
    assert "1.9x the fastest proxy (nginx, 49,454 req/s)" in headroom_rule(96_239.0, proxies, 3.0)
    assert headroom_rule(160_000.0, proxies, 3.0).endswith("3x rule met")
