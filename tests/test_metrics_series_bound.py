"""The bound on label values: log text cannot make series without end (``kvlog.metrics.bound``).

The pools of a real log go through the real ``kvlog migrate``, as ``kvlog follow`` feeds them; the
other labels that log content names (arena ids, event names, servers) are fed as events.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from kvlog.commands import migrate
from kvlog.metrics import MemorySeries

LIMIT = 64  # the documented default


def labelled_pools(path: Path, labels: int) -> list[dict[str, Any]]:
    """The events of a log in which one rank allocates ``labels`` differently labelled pools."""
    lines = [
        f"[2026-08-12 16:31:20 TP0] Pool {n} KV Cache is allocated. dtype: torch.bfloat16, #tokens: {n + 1}, "
        "K size: 1.00 GB, V size: 1.00 GB"
        for n in range(labels)
    ]
    path.write_text("\n".join(lines) + "\n")
    out = io.BytesIO()
    migrate(str(path), only_events=True, stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def series_of(series: MemorySeries, name: str, instance: str) -> list[tuple[dict[str, str], float]]:
    return [
        (labels, value)
        for metric, labels, value in series.samples()
        if metric.name == name and labels["server_instance"] == instance
    ]


def folded(series: MemorySeries, label: str, instance: str) -> float:
    found = [value for labels, value in series_of(series, "kvlog_series_folded_total", instance)
             if labels["label_name"] == label]  # fmt: skip
    assert len(found) == 1
    return found[0]


def test_four_thousand_pool_labels_on_one_rank_keep_the_first_64_and_fold_the_rest(tmp_path: Path) -> None:
    events = labelled_pools(tmp_path / "labels.log", 4000)
    assert len(events) == 4000
    series = MemorySeries()
    for event in events:
        series.observe(event, instance="a.log")
    series.observe(events[0], instance="b.log")  # another server's own bound
    pools = {labels["pool"]: value for labels, value in series_of(series, "kvlog_kv_pool_bytes", "a.log")}
    assert len(pools) == LIMIT + 1  # 1fdc331: 4,000
    assert {f"Pool {n}" for n in range(LIMIT)} < pools.keys()
    assert pools["#other"] == 2 << 30  # the last folded pool's allocation
    tokens = {labels["pool"]: value for labels, value in series_of(series, "kvlog_kv_pool_tokens", "a.log")}
    assert tokens["#other"] == 4000
    assert folded(series, "pool", "a.log") == 4000 - LIMIT
    assert [labels["pool"] for labels, _ in series_of(series, "kvlog_kv_pool_bytes", "b.log")] == ["Pool 0"]
    assert all(value == 0 for _, value in series_of(series, "kvlog_series_folded_total", "b.log"))


def test_pools_that_name_nothing_are_bounded_too() -> None:
    """Their names are their positions in the run (``#n``): as many as the log has allocations."""
    series = MemorySeries(label_values=3)
    for n in range(10):
        series.observe({"event": "kv_pool.allocation", "ranks": {"tp": 0}, "allocation_state": "allocated",
                        "kv_bytes": n, "num_tokens": n}, instance="a.log")  # fmt: skip
    pools = [labels["pool"] for labels, _ in series_of(series, "kvlog_kv_pool_bytes", "a.log")]
    assert pools == ["#0", "#1", "#2", "#other"]
    assert folded(series, "pool", "a.log") == 7


def test_a_post_capture_line_of_a_kept_pool_still_sizes_it_after_the_bound_is_reached() -> None:
    series = MemorySeries(label_values=2)
    for label in ("a", "b", "c"):
        series.observe({"event": "kv_pool.allocation", "ranks": {"tp": 0}, "label": label,
                        "allocation_state": "allocated", "kv_bytes": 10}, instance="s")  # fmt: skip
    series.observe({"event": "kv_pool.extended", "ranks": {"tp": 0}, "label": "a", "committed_bytes": 7}, instance="s")
    committed = {labels["pool"]: value for labels, value in series_of(series, "kvlog_kv_pool_committed_bytes", "s")}
    assert committed == {"a": 7.0, "b": 10.0, "#other": 10.0}


@pytest.mark.parametrize(
    ("label", "event", "metric"),
    [
        ("arena", lambda n: {"event": "kv_arena.ready", "arena_id": f"7_{n}", "reserved_va_bytes": n},
         "kvlog_arena_reserved_va_bytes"),
        ("arena", lambda n: {"event": "kv_arena.commit", "arena_id": f"7_{n}", "committed_bytes": n},
         "kvlog_arena_committed_bytes"),
        ("pool", lambda n: {"event": "kv_host_pool.allocation", "label": f"host {n}", "host_bytes": n},
         "kvlog_host_pool_bytes"),
        ("pool", lambda n: {"event": "mamba_pool.allocation", "label": f"mamba {n}", "conv_state_bytes": n,
                            "ssm_state_bytes": n}, "kvlog_mamba_pool_bytes"),
        ("event", lambda n: {"event": f"engine.step_{n}"}, "kvlog_events_total"),
        ("server", lambda n: {"event": "weights.load_end", "mem_usage_bytes": n,
                              "migrated": {"source_format": f"engine{n}/1"}}, "kvlog_weights_bytes"),
    ],
)  # fmt: skip
def test_every_label_the_log_names_is_bounded(label: str, event: Any, metric: str) -> None:
    series = MemorySeries(label_values=5)
    for n in range(50):
        series.observe({"ranks": {"tp": 0}} | event(n), instance="s")
    values = {labels[label] for labels, _ in series_of(series, metric, "s")}
    assert len(values) == 6  # 1fdc331: 50
    assert "#other" in values
    assert folded(series, label, "s") == 45


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one value"):
        MemorySeries(label_values=0)
