"""The series each event sets, exactly: every label of every series, its value, and what a new event removes.

Events are the dicts kvlog writes, built here field by field, so that each rule of ``kvlog.metrics.series``
(pool numbering, the draft's pool, restarts, sleep and wake, arenas) is met alone and its whole table is
compared: a label, a value or a series too many is a failure, not only a wrong figure.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest

from kvlog.metrics.series import METRICS, MemorySeries, server_of, this_process

SGLANG = {"source_format": "sglang-text/2025-01"}
Row = tuple[str, dict[str, str], float]


def scope(tp: str = "0", instance: str = "a.log", server: str = "sglang", **ranks: str) -> dict[str, str]:
    """The labels every rank-scoped series carries: those with a value (no ``dp=""``, no empty ``other_ranks``)."""
    labels = {"tp": tp, "dp": "", "pp": "", "ep": ""} | ranks | {"server": server, "server_instance": instance}
    return {name: value for name, value in labels.items() if value}


def event(name: str, tp: int | None = 0, **fields: Any) -> dict[str, Any]:
    """An sglang event of rank ``tp`` (None: no ranks at all)."""
    return {"event": name, "ranks": {} if tp is None else {"tp": tp}, "migrated": SGLANG, **fields}


def pool(pool: str | None = None, label: str | None = None, **fields: Any) -> dict[str, Any]:
    fields = {"allocation_state": "allocated", "kv_bytes": 100, **fields}
    return event("kv_pool.allocation", pool=pool, label=label, **fields)


def fed(*events: dict[str, Any], instance: str = "a.log") -> MemorySeries:
    series = MemorySeries()
    for one in events:
        series.observe(one, instance=instance)
    return series


def table(series: MemorySeries, *, counters: bool = False) -> list[Row]:
    """Every series as (name, labels, value), gauges only unless ``counters``."""
    return [
        (metric.name, labels, value) for metric, labels, value in series.samples() if counters or metric.kind == "gauge"
    ]


def zero_counters(instance: str) -> list[Row]:
    """The counters an instance has from its first sight, at 0 until something is counted."""
    return [
        ("kvlog_unparsed_lines_total", {"server_instance": instance}, 0.0),
        ("kvlog_schema_violations_total", {"server_instance": instance}, 0.0),
        *[("kvlog_series_folded_total", {"label_name": name, "server_instance": instance}, 0.0)
          for name in ("pool", "arena", "event", "server")],
    ]  # fmt: skip


def pools(series: MemorySeries, name: str = "kvlog_kv_pool_bytes") -> dict[str, float]:
    """The value of each ``pool`` label's series of ``name``."""
    return {labels["pool"]: value for found, labels, value in table(series) if found == name}


def test_a_pool_allocation_sets_its_bytes_tokens_and_committed_bytes_with_every_label() -> None:
    allocation = pool(k_bytes=3, v_bytes=4, kv_bytes=None, num_tokens=10)
    allocation["ranks"] = {"tp": 1, "dp": 0, "moe_dp": 1, "attn_cp": 5, "ep": None}
    labels = {"pool": "#0"} | scope("1", dp="0", other_ranks="attn_cp=5,moe_dp=1")
    assert table(fed(allocation), counters=True) == [
        ("kvlog_kv_pool_bytes", {"allocation_state": "allocated"} | labels, 7.0),
        ("kvlog_kv_pool_committed_bytes", labels, 7.0),
        ("kvlog_kv_pool_tokens", labels, 10.0),
        ("kvlog_events_total", {"event": "kv_pool.allocation", "server": "sglang", "server_instance": "a.log"}, 1.0),
        *zero_counters("a.log"),
    ]


def test_an_upper_bound_commits_nothing_and_a_stated_commitment_is_taken_as_stated() -> None:
    bound = pool("target", allocation_state="va_upper_bound", kv_bytes=80)
    assert pools(fed(bound), "kvlog_kv_pool_committed_bytes") == {}
    stated = pool("target", allocation_state="va_upper_bound", kv_bytes=80, committed_bytes=30)
    assert pools(fed(stated), "kvlog_kv_pool_committed_bytes") == {"target": 30}
    allocated = pool("target", kv_bytes=80, committed_bytes=20)
    assert pools(fed(allocated), "kvlog_kv_pool_committed_bytes") == {"target": 20}


def test_zero_is_a_size_and_kv_bytes_comes_before_k_and_v() -> None:
    series = fed(pool("mla", kv_bytes=0, k_bytes=5, v_bytes=5, num_tokens=0))
    assert pools(series) == {"mla": 0.0}
    assert pools(series, "kvlog_kv_pool_tokens") == {"mla": 0.0}


def test_pools_that_name_neither_pool_nor_label_are_numbered_per_rank_and_instance_named_ones_count_too() -> None:
    series = MemorySeries()
    for one in (pool(), pool("SWAKVPool", "SWA"), pool(), pool(tp=1)):
        series.observe(one, instance="a.log")
    series.observe(pool(), instance="b.log")
    found = {
        (labels["server_instance"], labels["tp"], labels["pool"], labels.get("label", ""))
        for _, labels, _ in table(series)
    }
    assert found == {
        ("a.log", "0", "#0", ""),
        ("a.log", "0", "SWAKVPool", "SWA"),
        ("a.log", "0", "#2", ""),
        ("a.log", "1", "#0", ""),
        ("b.log", "0", "#0", ""),
    }


def test_a_pool_known_by_its_label_alone_is_named_by_it() -> None:
    assert pools(fed(pool(label="Full"))) == {"Full": 100}


def test_a_new_allocation_of_a_pool_replaces_every_series_of_that_pool_only() -> None:
    series = fed(
        pool("target", num_tokens=10, committed_bytes=50),
        pool("draft", num_tokens=3),
        pool("target", allocation_state="va_upper_bound", kv_bytes=90),
    )
    assert table(series) == [
        ("kvlog_kv_pool_bytes", {"allocation_state": "allocated", "pool": "draft"} | scope(), 100.0),
        ("kvlog_kv_pool_bytes", {"allocation_state": "va_upper_bound", "pool": "target"} | scope(), 90),
        ("kvlog_kv_pool_committed_bytes", {"pool": "draft"} | scope(), 100.0),
        ("kvlog_kv_pool_tokens", {"pool": "draft"} | scope(), 3.0),
    ]


def test_post_capture_sizing_without_a_name_is_the_first_pool_of_the_run() -> None:
    sized = event(
        "kv_pool.post_capture_sized",
        pool=None,
        label=None,
        committed_bytes=40,
        budget_bytes=45,
        max_total_num_tokens=800,
        free_bytes=7,
    )
    series = fed(pool(allocation_state="va_upper_bound"), pool(), sized)
    first = {"pool": "#0"} | scope()
    assert [row for row in table(series) if row[1].get("pool") == "#0"] == [
        ("kvlog_kv_pool_bytes", {"allocation_state": "va_upper_bound"} | first, 100.0),
        ("kvlog_kv_pool_committed_bytes", first, 40.0),
        ("kvlog_kv_pool_budget_bytes", first, 45.0),
        ("kvlog_kv_pool_tokens", first, 800.0),
    ]
    assert ("kvlog_memory_avail_bytes", {"stage": "kv_pool.post_capture_sized"} | scope(), 7.0) in table(series)


def drafts_sizing(**fields: Any) -> dict[str, Any]:
    return event("kv_pool.post_capture_sized", pool=None, label="draft", committed_bytes=5, **fields)


def test_the_drafts_sizing_lands_on_the_runs_last_pool_that_named_neither() -> None:
    series = fed(pool("SWAKVPool", "SWA"), pool(), pool(), drafts_sizing())
    assert pools(series, "kvlog_kv_pool_committed_bytes") == {"SWAKVPool": 100, "#1": 100, "#2": 5}


def test_the_drafts_sizing_with_no_numbered_draft_pool_is_its_own_series() -> None:
    """Where the only unnamed pool is the first (the target's), it is not the draft's: ``#0`` keeps its figure."""
    series = fed(pool(), drafts_sizing())
    assert pools(series, "kvlog_kv_pool_committed_bytes") == {"#0": 100, "draft": 5}
    assert [labels["label"] for name, labels, _ in table(series) if labels["pool"] == "draft"] == ["draft"]


def test_a_pool_named_by_a_label_alone_is_never_taken_for_the_draft() -> None:
    """Only a pool naming neither is the draft's: sglang names its sub-pools, never the draft's pool."""
    series = fed(pool(), pool(label="Full"), drafts_sizing())
    assert pools(series, "kvlog_kv_pool_committed_bytes") == {"#0": 100, "Full": 100, "draft": 5}


def test_a_restart_removes_the_runs_series_and_numbering_of_that_rank_and_instance_only() -> None:
    series = MemorySeries()
    for one in (pool(), pool(), pool(tp=1), event("weights.load_end", mem_usage_bytes=9)):
        series.observe(one, instance="a.log")
    series.observe(pool(), instance="b.log")
    series.observe(event("weights.load_begin", avail_bytes=70), instance="a.log")
    series.observe(drafts_sizing(), instance="a.log")  # the old run's draft is gone with its run
    series.observe(pool(), instance="a.log")
    found = {(labels["server_instance"], labels["tp"], name, labels.get("pool")) for name, labels, _ in table(series)}
    assert found == {
        ("a.log", "0", "kvlog_memory_avail_bytes", None),
        ("a.log", "0", "kvlog_kv_pool_committed_bytes", "draft"),
        ("a.log", "0", "kvlog_kv_pool_bytes", "#0"),
        ("a.log", "0", "kvlog_kv_pool_committed_bytes", "#0"),
        ("a.log", "1", "kvlog_kv_pool_bytes", "#0"),
        ("a.log", "1", "kvlog_kv_pool_committed_bytes", "#0"),
        ("b.log", "0", "kvlog_kv_pool_bytes", "#0"),
        ("b.log", "0", "kvlog_kv_pool_committed_bytes", "#0"),
    }
    counted = [
        (labels["event"], labels["server_instance"], value)
        for name, labels, value in table(series, counters=True)
        if name == "kvlog_events_total"
    ]
    assert counted == [  # counters carry no rank: a restart keeps them
        ("kv_pool.allocation", "a.log", 4),
        ("weights.load_end", "a.log", 1),
        ("kv_pool.allocation", "b.log", 1),
        ("weights.load_begin", "a.log", 1),
        ("kv_pool.post_capture_sized", "a.log", 1),
    ]


def sleep(freed: int | None, **fields: Any) -> dict[str, Any]:
    return event("kv_pool.sleep", pool=None, label=None, freed_bytes=freed, **fields)


def wake(restored: int | None) -> dict[str, Any]:
    return event("kv_pool.wake", pool=None, label=None, restored_bytes=restored)


@pytest.mark.parametrize(
    ("moves", "committed"),
    [
        ([sleep(30)], 70),
        ([sleep(30), wake(20)], 90),
        ([sleep(130)], 0),  # never below nothing
        ([sleep(None), wake(None)], 100),
    ],
)
def test_sleep_and_wake_move_the_committed_bytes(moves: list[dict[str, Any]], committed: float) -> None:
    assert pools(fed(pool(), *moves), "kvlog_kv_pool_committed_bytes") == {"#0": committed}


def test_sleep_and_wake_of_a_pool_whose_commitment_is_unknown_set_nothing() -> None:
    series = fed(pool(allocation_state="va_upper_bound"), sleep(30), wake(50))
    assert pools(series, "kvlog_kv_pool_committed_bytes") == {}


def test_vllm_extension_and_capacity_are_the_first_pools() -> None:
    series = fed(
        event("kv_pool.extended", tp=None, committed_bytes=64, free_bytes=3),
        event("kv_pool.capacity", tp=None, num_tokens=1600),
    )
    first = {"pool": "#0"} | scope("")
    assert table(series) == [
        ("kvlog_kv_pool_committed_bytes", first, 64.0),
        ("kvlog_kv_pool_tokens", first, 1600.0),
        ("kvlog_memory_avail_bytes", {"stage": "kv_pool.extended"} | scope(""), 3.0),
    ]


def test_a_swa_summary_replaces_the_summary_of_its_rank_only() -> None:
    summary = "kv_pool.swa_summary"
    series = fed(
        event(summary, allocation_state="va_upper_bound", total_bytes=10),
        event(summary, tp=1, allocation_state="va_upper_bound", total_bytes=11),
        event(summary, allocation_state="allocated", total_bytes=12),
    )
    assert table(series) == [
        ("kvlog_kv_pool_swa_total_bytes", {"allocation_state": "allocated"} | scope(), 12.0),
        ("kvlog_kv_pool_swa_total_bytes", {"allocation_state": "va_upper_bound"} | scope("1"), 11.0),
    ]


def arena(name: str, arena_id: str = "7_0", **fields: Any) -> dict[str, Any]:
    return event(f"kv_arena.{name}", arena_id=arena_id, **fields)


def test_arena_series_follow_commits_and_a_close_drops_that_arena_only() -> None:
    series = fed(
        arena("ready", reserved_va_bytes=800),
        arena("ready", "8_0", reserved_va_bytes=900),
        arena("commit", committed_bytes=40, measured_committed_bytes=41),
        arena("decommit", committed_bytes=30, measured_committed_bytes=None),
        arena("error", measured_committed_bytes=99),  # no bookkeeping figure: nothing changes
        arena("commit", "8_0", committed_bytes=0, measured_committed_bytes=0),
    )
    labels = {"arena": "7_0"} | scope()
    other = {"arena": "8_0"} | scope()
    assert table(series) == [
        ("kvlog_arena_reserved_va_bytes", labels, 800.0),
        ("kvlog_arena_reserved_va_bytes", other, 900.0),
        ("kvlog_arena_committed_bytes", labels, 30.0),
        ("kvlog_arena_committed_bytes", other, 0.0),
        ("kvlog_arena_measured_committed_bytes", other, 0.0),
    ]
    series.observe(arena("closed"), instance="a.log")
    assert table(series) == [
        ("kvlog_arena_reserved_va_bytes", other, 900.0),
        ("kvlog_arena_committed_bytes", other, 0.0),
        ("kvlog_arena_measured_committed_bytes", other, 0.0),
    ]


def test_weights_cuda_graphs_and_the_free_memory_of_each_stage() -> None:
    series = fed(
        event("weights.load_begin", avail_bytes=70),
        event("weights.load_end", mem_usage_bytes=16, avail_bytes=54),
        event("kv_memory.pool_end", avail_bytes=12),
        event("cuda_graph.captured", mem_usage_bytes=2, avail_bytes=10),
        event("scheduler.limits", available_gpu_mem_bytes=9),
    )
    stage = [{"stage": name} | scope() for name in ("weights.load_begin", "weights.load_end", "kv_memory.pool_end")]
    assert table(series) == [
        ("kvlog_memory_avail_bytes", stage[0], 70.0),
        ("kvlog_memory_avail_bytes", stage[1], 54.0),
        ("kvlog_memory_avail_bytes", stage[2], 12.0),
        ("kvlog_memory_avail_bytes", {"stage": "cuda_graph.captured"} | scope(), 10.0),
        ("kvlog_memory_avail_bytes", {"stage": "scheduler.limits"} | scope(), 9.0),
        ("kvlog_weights_bytes", scope(), 16.0),
        ("kvlog_cuda_graph_bytes", scope(), 2.0),
    ]


@pytest.mark.parametrize(
    ("name", "fields"),
    [
        (
            "memory.profile",
            {
                "total_bytes": "total",
                "initial_usage_bytes": "initial_usage",
                "peak_torch_bytes": "peak_torch",
                "post_profile_usage_bytes": "post_profile_usage",
                "non_torch_bytes": "non_torch",
                "kv_cache_bytes": "kv_cache",
            },
        ),
        ("memory.profile_budget", {"total_bytes": "total", "budget_bytes": "budget"}),
        (
            "memory.profile_usage",
            {
                "weights_bytes": "weights",
                "non_torch_bytes": "non_torch",
                "activation_peak_bytes": "activation_peak",
                "kv_cache_bytes": "kv_cache",
            },
        ),
        ("kv_pool.memory_available", {"available_bytes": "kv_cache"}),
    ],
)
def test_each_figure_of_the_memory_plan_is_a_quantity(name: str, fields: dict[str, str]) -> None:
    figures = {field: index + 1 for index, field in enumerate(fields)}
    series = fed(event(name, tp=None, **figures))
    assert table(series) == [
        ("kvlog_memory_profile_bytes", {"quantity": quantity} | scope(""), float(figures[field]))
        for field, quantity in fields.items()
    ]


def test_mamba_and_host_pools_are_their_label_or_their_number() -> None:
    series = fed(
        event("mamba_pool.allocation", conv_state_bytes=1, ssm_state_bytes=2, intermediate_ssm_state_bytes=4),
        event(
            "mamba_pool.allocation",
            label="draft",
            conv_state_bytes=1,
            ssm_state_bytes=2,
            intermediate_ssm_state_bytes=4,
            intermediate_conv_window_bytes=8,
        ),
        event("mamba_pool.allocation", conv_state_bytes=1),  # no ssm state: not a pool's size
        event("kv_host_pool.allocation", host_bytes=5),
        event("kv_host_pool.allocation", label="full", host_bytes=6),
        event("kv_host_pool.allocation", host_bytes=7),
    )
    assert table(series) == [
        ("kvlog_mamba_pool_bytes", {"pool": "#0"} | scope(), 7.0),
        ("kvlog_mamba_pool_bytes", {"pool": "draft"} | scope(), 15.0),
        ("kvlog_host_pool_bytes", {"pool": "#0"} | scope(), 5.0),
        ("kvlog_host_pool_bytes", {"pool": "full"} | scope(), 6.0),
        ("kvlog_host_pool_bytes", {"pool": "#2"} | scope(), 7.0),
    ]


def test_counters_add_up_per_instance_and_ignore_what_is_no_count() -> None:
    series = MemorySeries()
    series.observe({"event": "kvlog.schema_violation", "suppressed": 4}, instance="a")
    series.observe({"event": "kvlog.schema_violation", "suppressed": None}, instance="a")
    series.count_violations(2, instance="a")
    series.count_violations(0, instance="b")
    series.count_unparsed(3, instance="a")
    series.count_unparsed(-1, instance="a")
    series.count_violations(-1, instance="a")
    assert table(series, counters=True) == [
        ("kvlog_events_total", {"event": "kvlog.schema_violation", "server": "kvlog", "server_instance": "a"}, 2.0),
        ("kvlog_unparsed_lines_total", {"server_instance": "a"}, 3.0),
        ("kvlog_unparsed_lines_total", {"server_instance": "b"}, 0.0),
        ("kvlog_schema_violations_total", {"server_instance": "a"}, 8.0),
        ("kvlog_schema_violations_total", {"server_instance": "b"}, 0.0),
        *[("kvlog_series_folded_total", {"label_name": name, "server_instance": instance}, 0.0)
          for instance in ("a", "b") for name in ("pool", "arena", "event", "server")],
    ]  # fmt: skip


def test_ranks_that_are_null_or_absent_are_no_labels_and_a_rank_that_is_no_number_skips_the_event() -> None:
    nothing = pool("p")
    nothing["ranks"] = None
    unset = pool("q")
    unset["ranks"] = {"tp": None, "rank": None}
    flag = pool("r")
    flag["ranks"] = {"tp": True}
    series = fed(nothing, unset, flag)
    assert {labels["pool"] for _, labels, _ in table(series)} == {"p", "q"}
    assert all(labels.keys().isdisjoint({"tp", "dp", "pp", "ep", "other_ranks"}) for _, labels, _ in table(series))


@pytest.mark.parametrize(
    ("migrated", "server"),
    [
        ({"source_format": "sglang-text/2025-01"}, "sglang"),
        ({"source_format": "vllm-text/0.11"}, "vllm"),
        ({"source_format": "sglang/json"}, "sglang"),
        ({"source_format": "-text/1"}, "kvlog"),
        ({"source_format": 3}, "kvlog"),
        ({}, "kvlog"),
        ("sglang-text/2025-01", "kvlog"),
        (None, "kvlog"),
    ],
)
def test_the_server_is_named_by_the_source_format(migrated: Any, server: str) -> None:
    assert server_of({"event": "x", "migrated": migrated}) == server


def test_this_process_is_host_and_pid() -> None:
    assert this_process() == f"{socket.gethostname()}:{os.getpid()}"


def test_only_pool_scoped_and_other_rank_metrics_are_removed_by_a_restart() -> None:
    scoped = {metric.name for metric in METRICS if metric.rank_scoped}
    assert scoped == {metric.name for metric in METRICS if metric.kind == "gauge"}
    assert {"kvlog_events_total", "kvlog_unparsed_lines_total", "kvlog_schema_violations_total"}.isdisjoint(scoped)


@pytest.mark.parametrize(
    "odd",
    [
        {"event": 3, "ranks": {"tp": 0}, "kv_bytes": 1},
        {"event": None},
        {"ranks": {"tp": 0}},
        {"event": "kv_pool.allocation", "ranks": ["tp", 0], "allocation_state": "allocated", "kv_bytes": 1},
        {"event": "kv_pool.allocation", "ranks": {"tp": 0.5}, "allocation_state": "allocated", "kv_bytes": 1},
    ],
)
def test_an_event_without_a_name_or_with_ranks_that_are_no_ranks_is_not_even_counted(odd: dict[str, Any]) -> None:
    assert fed(odd).samples() == []


@pytest.mark.parametrize(
    "incomplete",
    [{"allocation_state": "allocated", "total_bytes": None}, {"allocation_state": None, "total_bytes": 50}],
    ids=["no size", "no state"],
)
def test_a_unified_pool_without_a_state_or_a_size_is_skipped_and_takes_no_place(incomplete: dict[str, Any]) -> None:
    """Skipped whole: the next unified pool is still the run's first (``unified``, not ``unified#1``)."""
    series = fed(
        event("kv_pool.unified_allocation", **incomplete),
        event("kv_pool.unified_allocation", allocation_state="allocated", total_bytes=60),
    )
    labels = {"pool": "unified"} | scope()
    assert table(series) == [
        ("kvlog_kv_pool_bytes", {"allocation_state": "allocated"} | labels, 60.0),
        ("kvlog_kv_pool_committed_bytes", labels, 60.0),
    ]
