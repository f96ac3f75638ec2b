"""Adversarial review of MemorySeries: inputs a live log or an emission tap can carry that the first tests missed."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kvlog.commands import migrate
from kvlog.metrics import MemorySeries
from kvlog.metrics.prometheus import SeriesCollector


def _gauges(series: MemorySeries, name: str) -> list[tuple[dict[str, str], float]]:
    return [(labels, value) for metric, labels, value in series.samples() if metric.name == name]


def test_an_integer_beyond_a_floats_range_skips_the_update_and_never_raises() -> None:
    series = MemorySeries()
    series.observe({"event": "weights.load_end", "mem_usage_bytes": 10**400, "ranks": {"tp": 0}}, instance="x")
    series.observe({"event": "kv_pool.sleep", "freed_bytes": 10**400}, instance="x")
    series.count_unparsed(10**400, instance="x")
    assert _gauges(series, "kvlog_weights_bytes") == []
    assert _gauges(series, "kvlog_events_total") != []  # the event itself still counts


VLLM_TP2 = """\
(Worker rank=0 pid=100) INFO 06-01 10:00:09 [gpu_model_runner.py:1] Model loading took 7.50 GiB memory and 5.4 seconds
(Worker rank=1 pid=101) INFO 06-01 10:00:09 [gpu_model_runner.py:1] Model loading took 7.25 GiB memory and 5.4 seconds
(Worker rank=0 pid=100) INFO 06-01 10:00:37 [gpu_model_runner.py:2] Graph capturing finished in 22 secs, took 0.50 GiB
(Worker rank=1 pid=101) INFO 06-01 10:00:37 [gpu_model_runner.py:2] Graph capturing finished in 22 secs, took 0.25 GiB
"""
GIB = 1 << 30


def _migrated(tmp_path: Path, text: str) -> list[dict[str, Any]]:
    log = tmp_path / "server.log"
    log.write_text(text)
    out = io.BytesIO()
    migrate([log], only_events=True, stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_vllm_workers_known_only_by_their_rank_keep_a_series_each(tmp_path: Path) -> None:
    events = _migrated(tmp_path, VLLM_TP2)
    assert [event["ranks"] for event in events] == [{"rank": 0}, {"rank": 1}] * 2
    series = MemorySeries()
    for event in events:
        series.observe(event, instance="vllm")
    weights = {labels["other_ranks"]: value for labels, value in _gauges(series, "kvlog_weights_bytes")}
    assert weights == {"rank=0": 7.5 * GIB, "rank=1": 7.25 * GIB}  # summed over ranks: both workers' weights
    graphs = {labels["other_ranks"]: value for labels, value in _gauges(series, "kvlog_cuda_graph_bytes")}
    assert graphs == {"rank=0": 0.5 * GIB, "rank=1": 0.25 * GIB}


def test_a_restart_of_one_moe_dp_rank_leaves_the_others_series() -> None:
    series = MemorySeries()
    for rank in (0, 1):
        series.observe(
            {"event": "weights.load_end", "mem_usage_bytes": 10 + rank, "ranks": {"moe_dp": rank}}, instance="x"
        )
    series.observe({"event": "weights.load_begin", "avail_bytes": 1, "ranks": {"moe_dp": 0}}, instance="x")
    assert [(labels["other_ranks"], value) for labels, value in _gauges(series, "kvlog_weights_bytes")] == [
        ("moe_dp=1", 11.0)
    ]


def test_other_rank_kinds_are_sorted_into_one_label_beside_tp() -> None:
    series = MemorySeries()
    event = {"event": "weights.load_end", "mem_usage_bytes": 1, "ranks": {"tp": 5, "moe_dp": 2, "attn_cp": 5}}
    series.observe(event, instance="x")
    [(labels, _)] = _gauges(series, "kvlog_weights_bytes")
    assert (labels["tp"], labels["other_ranks"]) == ("5", "attn_cp=5,moe_dp=2")


def test_the_exposition_carries_other_ranks_only_where_a_server_has_them() -> None:
    series = MemorySeries()
    series.observe({"event": "weights.load_end", "mem_usage_bytes": 1, "ranks": {"tp": 0}}, instance="sglang")
    series.observe({"event": "weights.load_end", "mem_usage_bytes": 2, "ranks": {"rank": 1}}, instance="vllm")
    registry = CollectorRegistry()
    registry.register(SeriesCollector(series))
    samples = [
        sample
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
        if sample.name == "kvlog_weights_bytes"
    ]
    assert {sample.labels["server_instance"]: sample.labels.get("other_ranks") for sample in samples} == {
        "sglang": None,  # as before the label existed: Prometheus stores an empty label as none anyway
        "vllm": "rank=1",
    }


def test_a_draft_workers_unified_pool_never_replaces_the_targets() -> None:
    series = MemorySeries()
    for total in (40 * GIB, 2 * GIB):  # the target's UnifiedKVPool, then the draft worker's
        unified = {"event": "kv_pool.unified_allocation", "allocation_state": "allocated", "total_bytes": total,
                   "sub_pools": 2, "committed_bytes": None, "ranks": {"tp": 0}}  # fmt: skip
        series.observe(unified, instance="x")
    pools = {labels["pool"]: value for labels, value in _gauges(series, "kvlog_kv_pool_bytes")}
    assert pools == {"unified": 40 * GIB, "unified#1": 2 * GIB}
    assert sum(value for _, value in _gauges(series, "kvlog_kv_pool_committed_bytes")) == 42 * GIB


AT = "[2026-11-02 08:04:40 TP0] "
LOAD = f"{AT}Load weight begin. avail mem=139.28 GB"
HYBRID_TARGET = [
    f"{AT}SWA KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 1061120, K size: 4.05 GB, V size: 4.05 GB",
    f"{AT}Full KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 1326400, K size: 5.06 GB, V size: 5.06 GB",
]
PLAIN_TARGET = [f"{AT}KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 1061120, KV size: 8.05 GB"]
DRAFT = [
    f"{AT}KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1523712, K size: 0.50 GB, V size: 0.50 GB",
    f"{AT}Post-capture KV sizing: draft KV cache allocated. dtype: torch.bfloat16, #tokens: 1000000, KV size: 0.60 GB",
]


@pytest.mark.parametrize(("target", "draft"), [(HYBRID_TARGET, "#2"), (PLAIN_TARGET, "#1")])
def test_the_drafts_post_capture_sizing_resizes_the_drafts_pool_not_a_second_one(
    tmp_path: Path, target: list[str], draft: str
) -> None:
    events = _migrated(tmp_path, "\n".join([LOAD, *target, *DRAFT]) + "\n")
    assert [event["event"] for event in events][-2:] == ["kv_pool.allocation", "kv_pool.post_capture_sized"]
    assert events[-1]["label"] == "draft"
    series = MemorySeries()
    for event in events:
        series.observe(event, instance="x")
    # the draft's allocation comes after the target's pools: it is #1 after one, #2 after SWA and Full
    committed = {labels["pool"]: value for labels, value in _gauges(series, "kvlog_kv_pool_committed_bytes")}
    assert committed == {draft: round(0.60 * GIB)}  # resized from the 1 GiB it was allocated with, and once
    tokens = {labels["pool"]: value for labels, value in _gauges(series, "kvlog_kv_pool_tokens")}
    assert tokens[draft] == 1000000
    assert "draft" not in tokens
