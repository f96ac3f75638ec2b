"""MemorySeries: what a dashboard or an alert reads from each event, on real migrated logs and live events.

The corpus logs go through the real ``kvlog migrate`` (the same events ``kvlog follow`` will feed);
live events are built with the typed constructors and emitted through kvlog's pipeline.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

import kvlog
from kvlog import events
from kvlog.commands import migrate
from kvlog.emission import add_tap, get_config, remove_tap, restore
from kvlog.event_base import Event
from kvlog.metrics import METRICS, MemorySeries

CORPUS = Path(__file__).parent / "corpus"
GB = 1 << 30

Sample = tuple[str, dict[str, str], float]


def migrated(log: str) -> list[dict[str, Any]]:
    out = io.BytesIO()
    migrate(str(CORPUS / log), only_events=True, stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def samples(series: MemorySeries, name: str, **labels: str) -> list[Sample]:
    """The series of ``name`` whose labels include ``labels``."""
    return [
        (metric.name, found, value)
        for metric, found, value in series.samples()
        if metric.name == name and all(found.get(key) == want for key, want in labels.items())
    ]


def value(series: MemorySeries, name: str, **labels: str) -> float:
    found = samples(series, name, **labels)
    assert len(found) == 1, f"{name}{labels}: {found}"
    return found[0][2]


def fed(*logs: str, instance: str = "srv") -> MemorySeries:
    series = MemorySeries()
    for log in logs:
        for event in migrated(log):
            series.observe(event, instance=instance)
    return series


def live(*typed: tuple[Event, dict[str, int]]) -> list[dict[str, Any]]:
    """Emit ``typed`` (event, ranks) through kvlog's pipeline; the dicts a tap saw."""
    seen: list[dict[str, Any]] = []
    saved = get_config()
    kvlog.configure(stream=io.StringIO())
    add_tap(seen.append)
    try:
        for event, ranks in typed:
            kvlog.bind_ranks(**ranks)
            kvlog.emit(event)
    finally:
        kvlog.bind_ranks()
        remove_tap(seen.append)
        restore(saved)
    return seen


def test_metric_names_follow_prometheus_conventions() -> None:
    names = [metric.name for metric in METRICS]
    assert len(names) == len(set(names))
    for metric in METRICS:
        assert metric.name.startswith("kvlog_")
        assert metric.name.endswith("_total") == (metric.kind == "counter"), metric.name
        if metric.unit != "1":
            assert metric.name.removesuffix("_total").endswith(f"_{metric.unit}"), metric.name
        assert "instance" not in metric.labels, "Prometheus overwrites instance with the scraped target"


def test_a_draft_pool_and_its_target_never_share_a_series() -> None:
    # run 1 of the log: TP0's target pool (VA upper bound, 36.88+36.88 GB) then its EAGLE3 draft (0.46+0.46 GB),
    # both pool=null, label=null
    series = MemorySeries()
    run = migrated("postcapture_before_fix_2026_07.log")[:13]  # through the post-capture line, after the capture
    for event in run:
        series.observe(event, instance="a.log")
    pools = [e for e in run if e["event"] == "kv_pool.allocation" and e["ranks"] == {"tp": 0}]
    assert value(series, "kvlog_kv_pool_bytes", tp="0", pool="#0", allocation_state="va_upper_bound") == (
        pools[0]["k_bytes"] + pools[0]["v_bytes"]
    )
    assert value(series, "kvlog_kv_pool_bytes", tp="0", pool="#1", allocation_state="allocated") == (
        pools[1]["k_bytes"] + pools[1]["v_bytes"]
    )
    # the target's upper bound is not memory: no committed bytes; the draft's allocation is
    assert samples(series, "kvlog_kv_pool_committed_bytes", tp="0", pool="#0") == []
    assert value(series, "kvlog_kv_pool_committed_bytes", tp="0", pool="#1") == pools[1]["k_bytes"] * 2
    # post-capture sizing of the target (label null) lands on the target's pool, #0
    assert value(series, "kvlog_kv_pool_tokens", tp="0", pool="#0") == 1638400
    assert value(series, "kvlog_memory_avail_bytes", tp="0", stage="kv_pool.post_capture_sized") == 3511135764


def test_a_restart_removes_the_previous_runs_series_of_that_rank_only() -> None:
    series = fed("postcapture_before_fix_2026_07.log", instance="a.log")
    # TP0 restarted three times: only the last run's pools are left (SWA, Full, the draft #2)
    tp0 = {(s[1]["pool"], s[1]["allocation_state"]) for s in samples(series, "kvlog_kv_pool_bytes", tp="0")}
    assert tp0 == {("SWA", "va_upper_bound"), ("Full", "va_upper_bound"), ("#2", "allocated")}
    assert value(series, "kvlog_kv_pool_swa_total_bytes", tp="0") == 9792525435
    assert samples(series, "kvlog_arena_reserved_va_bytes", tp="0") == []  # the last run had no arena
    # TP1 ran only in the first run and never restarted: its series stay
    assert {s[1]["pool"] for s in samples(series, "kvlog_kv_pool_bytes", tp="1")} == {"#0", "#1"}
    # counters are not per run
    assert value(series, "kvlog_events_total", event="weights.load_begin") == 6


def test_a_restart_leaves_other_server_instances_alone() -> None:
    series = MemorySeries()
    first = migrated("gen1_early_2025.log")
    for event in first[:6]:
        series.observe(event, instance="a.log")
        series.observe(event, instance="b.log")
    restart = next(e for e in first if e["event"] == "weights.load_begin" and e["ranks"] == {"tp": 0})
    series.observe(restart, instance="b.log")
    assert len(samples(series, "kvlog_kv_pool_bytes", server_instance="a.log", tp="0")) == 1
    assert samples(series, "kvlog_kv_pool_bytes", server_instance="b.log", tp="0") == []
    assert len(samples(series, "kvlog_kv_pool_bytes", server_instance="b.log", tp="1")) == 1


def test_sums_of_pool_bytes_never_count_the_swa_summary_twice() -> None:
    series = fed("hybrid_swa_2026.log")
    pools = sum(s[2] for s in samples(series, "kvlog_kv_pool_bytes", tp="0"))
    summary = value(series, "kvlog_kv_pool_swa_total_bytes", tp="0")
    assert {s[1]["pool"] for s in samples(series, "kvlog_kv_pool_bytes", tp="0")} == {"SWA", "Full"}
    assert math.isclose(pools, summary, rel_tol=0.01)  # the summary is the sub-pools' total, printed rounded


def test_labels_name_the_server_and_the_ranks() -> None:
    series = fed("gen2_2025.log", "kvlog_json_v1.log")
    assert {s[1]["server"] for s in samples(series, "kvlog_kv_pool_bytes")} == {"sglang", "kvlog"}
    pp1 = samples(series, "kvlog_memory_avail_bytes", stage="weights.load_end", pp="1")
    assert [(s[1]["tp"], "dp" in s[1], "ep" in s[1]) for s in pp1] == [("0", False, False)]  # no empty labels


def test_arena_commit_decommit_and_close() -> None:
    arena = {"arena_id": "7_0", "offset_bytes": 0, "duration_us": 5.0}
    seen = live(
        (events.KvArenaReady(arena_id="7_0", backend="cuda", device=0, reserved_va_bytes=80 * GB,
                             granularity_bytes=2 << 20, handle_type=None), {"tp": 1}),
        (events.KvArenaCommit(**arena, range_count=1, nbytes=4 * GB, committed_bytes=4 * GB,
                              measured_committed_bytes=4 * GB + 4096), {"tp": 1}),
    )  # fmt: skip
    series = MemorySeries()
    for event in seen:
        series.observe(event, instance="me")
    assert value(series, "kvlog_arena_reserved_va_bytes", arena="7_0", tp="1", server="kvlog") == 80 * GB
    assert value(series, "kvlog_arena_committed_bytes", arena="7_0") == 4 * GB
    assert value(series, "kvlog_arena_measured_committed_bytes", arena="7_0") == 4 * GB + 4096
    decommit = events.KvArenaDecommit(
        **arena, range_count=1, nbytes=GB, committed_bytes=3 * GB, measured_committed_bytes=None
    )
    for event in live((decommit, {"tp": 1})):
        series.observe(event, instance="me")
    assert value(series, "kvlog_arena_committed_bytes", arena="7_0") == 3 * GB
    assert samples(series, "kvlog_arena_measured_committed_bytes") == []  # no stale measurement
    for event in live((events.KvArenaClosed(arena_id="7_0", released_bytes=3 * GB), {"tp": 1})):
        series.observe(event, instance="me")
    assert [s for s in series.samples() if s[0].name.startswith("kvlog_arena")] == []


def test_post_capture_budget_sleep_and_wake_move_committed_bytes() -> None:
    pool = {"pool": "target", "label": None}
    seen = live(
        (events.KvPoolAllocation(**pool, layout="mla", dtype=None, num_tokens=None, allocation_state="va_upper_bound",
                                 committed_bytes=None, kv_bytes=50 * GB), {"tp": 0}),
        (events.KvPoolPostCaptureSized(**pool, dtype=None, max_total_num_tokens=1 << 20, free_bytes=None,
                                       budget_bytes=30 * GB, committed_bytes=29 * GB), {"tp": 0}),
        (events.KvPoolSleep(**pool, arena_ids=["a"], freed_bytes=29 * GB, measured_freed_bytes=None,
                            measurement_source=None, discrepancy_bytes=None, duration_us=1.0), {"tp": 0}),
    )  # fmt: skip
    series = MemorySeries()
    for event in seen:
        series.observe(event, instance="me")
    assert value(series, "kvlog_kv_pool_bytes", pool="target", allocation_state="va_upper_bound") == 50 * GB
    assert value(series, "kvlog_kv_pool_budget_bytes", pool="target") == 30 * GB
    assert value(series, "kvlog_kv_pool_tokens", pool="target") == 1 << 20
    assert value(series, "kvlog_kv_pool_committed_bytes", pool="target") == 0
    wake = events.KvPoolWake(**pool, arena_ids=["a"], restored_bytes=29 * GB, measured_restored_bytes=None,
                             measurement_source=None, discrepancy_bytes=None, duration_us=1.0)  # fmt: skip
    for event in live((wake, {"tp": 0})):
        series.observe(event, instance="me")
    assert value(series, "kvlog_kv_pool_committed_bytes", pool="target") == 29 * GB


def test_a_named_pools_new_allocation_replaces_its_state() -> None:
    """A pool first reported as address space, then allocated: one state at a time, never both."""
    reserved = pool_event("SWAKVPool", "SWA", "va_upper_bound", 8 * GB)
    backed = pool_event("SWAKVPool", "SWA", "allocated", 3 * GB)
    other = pool_event("SWAKVPool", "Full", "va_upper_bound", 9 * GB)
    series = MemorySeries()
    for event in live((reserved, {"tp": 0}), (other, {"tp": 0}), (backed, {"tp": 0})):
        series.observe(event, instance="me")
    states = {(s[1]["label"], s[1]["allocation_state"]): s[2] for s in samples(series, "kvlog_kv_pool_bytes")}
    assert states == {("SWA", "allocated"): 3 * GB, ("Full", "va_upper_bound"): 9 * GB}
    assert value(series, "kvlog_kv_pool_committed_bytes", label="SWA") == 3 * GB
    assert samples(series, "kvlog_kv_pool_committed_bytes", label="Full") == []


def pool_event(pool: str | None, label: str | None, state: str, size: int) -> events.KvPoolAllocation:
    return events.KvPoolAllocation(
        pool=pool,
        label=label,
        layout="mha",
        dtype=None,
        num_tokens=None,
        allocation_state=state,  # type: ignore[arg-type]
        committed_bytes=None,
        k_bytes=size // 2,
        v_bytes=size // 2,
    )


def test_unified_pool_counts_once_as_a_pool() -> None:
    unified = events.KvPoolUnifiedAllocation(allocation_state="allocated", total_bytes=60 * GB, sub_pools=3,
                                             committed_bytes=None)  # fmt: skip
    series = MemorySeries()
    for event in live((unified, {"tp": 0})):
        series.observe(event, instance="me")
    assert value(series, "kvlog_kv_pool_bytes", pool="unified", allocation_state="allocated") == 60 * GB
    assert value(series, "kvlog_kv_pool_committed_bytes", pool="unified") == 60 * GB


def test_other_memory_figures() -> None:
    series = fed("gen3_dtype_2026.log", "postcapture_after_fix_2026_09.log", "hybrid_swa_2026.log")
    every = migrated("gen3_dtype_2026.log")
    mamba = next(e for e in every if e["event"] == "mamba_pool.allocation")
    host = next(e for e in every if e["event"] == "kv_host_pool.allocation")
    assert value(series, "kvlog_mamba_pool_bytes", tp="5") == mamba["conv_state_bytes"] + mamba["ssm_state_bytes"]
    assert value(series, "kvlog_host_pool_bytes", tp="5", pool="#0") == host["host_bytes"]
    assert value(series, "kvlog_host_pool_bytes", tp="0", pool="full") == 21730000000
    gen2 = migrated("gen2_2025.log")
    series = fed("gen2_2025.log")
    available = next(e for e in gen2 if e["event"] == "kv_pool.memory_available")
    assert value(series, "kvlog_memory_profile_bytes", quantity="kv_cache") == available["available_bytes"]
    loaded = [e for e in gen2 if e["event"] == "weights.load_end" and e["mem_usage_bytes"] is not None]
    assert {s[2] for s in samples(series, "kvlog_weights_bytes")} <= {e["mem_usage_bytes"] for e in loaded}
    assert samples(series, "kvlog_weights_bytes")


def test_vllm_profile_capacity_and_extension() -> None:
    series = MemorySeries()
    profile = events.MemoryProfile(total_bytes=80 * GB, initial_usage_bytes=GB, peak_torch_bytes=20 * GB,
                                   post_profile_usage_bytes=21 * GB, non_torch_bytes=GB, kv_cache_bytes=50 * GB,
                                   gpu_memory_utilization=0.9)  # fmt: skip
    capacity = events.KvPoolCapacity(num_gpu_blocks=100, num_cpu_blocks=None, num_tokens=1600, max_model_len=None,
                                     max_concurrency=None, device=None)  # fmt: skip
    extended = events.KvPoolExtended(num_blocks=100, committed_bytes=10 * GB, free_bytes=None, transient_bytes=None,
                                     transient_peak_bytes=None, torch_reserve_growth_bytes=None, blocks_bytes=None,
                                     requested_bytes=None, torch_limit_bytes=None)  # fmt: skip
    for event in live((profile, {}), (capacity, {}), (extended, {})):
        series.observe({**event, "migrated": {"source_format": "vllm-text/0.11"}}, instance="v")
    assert value(series, "kvlog_memory_profile_bytes", quantity="kv_cache", server="vllm") == 50 * GB
    assert value(series, "kvlog_memory_profile_bytes", quantity="total") == 80 * GB
    assert value(series, "kvlog_kv_pool_tokens", pool="#0") == 1600
    assert value(series, "kvlog_kv_pool_committed_bytes", pool="#0") == 10 * GB


def test_violations_and_unparsed_lines_count() -> None:
    series = MemorySeries()
    series.observe({"event": "kvlog.schema_violation", "schema_version": 1, "suppressed": 4, "errors": []},
                   instance="x")  # fmt: skip
    series.count_violations(2, instance="x")
    series.count_unparsed(3, instance="x")
    series.count_unparsed(1, instance="x")
    assert value(series, "kvlog_schema_violations_total", server_instance="x") == 7
    assert value(series, "kvlog_unparsed_lines_total", server_instance="x") == 4


@pytest.mark.parametrize(
    "event",
    [
        None,
        "kv_pool.allocation",
        [],
        {},
        {"event": 3},
        {"event": "kv_pool.allocation"},
        {"event": "kv_pool.allocation", "ranks": "tp0", "allocation_state": "allocated", "kv_bytes": 1},
        {"event": "kv_pool.allocation", "ranks": {"tp": "0"}, "allocation_state": "allocated", "kv_bytes": 1},
        {"event": "kv_pool.allocation", "allocation_state": "allocated", "kv_bytes": "1 GB"},
        {"event": "kv_pool.allocation", "allocation_state": "allocated", "kv_bytes": True},
        {"event": "kv_pool.allocation", "allocation_state": "allocated", "kv_bytes": -1},
        {"event": "kv_pool.allocation", "allocation_state": "allocated", "kv_bytes": float("nan")},
        {"event": "kv_pool.allocation", "allocation_state": None, "k_bytes": 1, "v_bytes": 1},
        {"event": "kv_pool.allocation", "allocation_state": "allocated", "k_bytes": 1},
        {"event": "kv_arena.commit", "arena_id": None, "committed_bytes": 1},
        {"event": "kv_arena.closed", "arena_id": ["x"]},
        {"event": "kv_pool.sleep", "freed_bytes": 1},
        {"event": "mamba_pool.allocation", "conv_state_bytes": 1},
        {"event": "weights.load_begin", "avail_bytes": None, "migrated": "sglang"},
        {"event": "kvlog.schema_violation", "suppressed": "many"},
    ],
)
def test_odd_input_skips_the_update_and_never_raises(event: Any) -> None:
    series = MemorySeries()
    series.observe(event, instance="x")
    series.count_unparsed("3", instance="x")  # type: ignore[arg-type]
    gauges = [s for s in series.samples() if s[0].kind == "gauge"]
    assert gauges == []
