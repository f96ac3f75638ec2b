"""Late evidence in a live log: a pool state already published is corrected, in the events, gauges and OTel alike.

A 2026-07 sglang log prints a VA-backed pool as ``KV Cache is allocated``; only the post-capture line,
minutes later, tells. When it comes after ``--hold`` the pool was written as its line claimed, so the
follower writes a ``kv_pool.state_corrected`` event, and every consumer of the events flips the pool.
A pool larger than the memory free when the weights began to load is told at once, with no hold.
"""

from __future__ import annotations

import io
import logging
import re
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
from follow_helpers import append, following, passes, wait_for
from otel_helpers import in_memory
from prometheus_client.parser import text_string_to_metric_families

from kvlog import commands
from kvlog.integrate.handler import EventHandler
from kvlog.integrate.servers import SGLANG
from kvlog.metrics import MemorySeries
from kvlog.migration import engine
from kvlog.text.prefix import SGLANG as SGLANG_PREFIX

SERVER_ARGS = (
    "[2026-07-23 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-32B', tp_size=1, "
    "enable_post_capture_kv_sizing=True, log_level='info')\n"
)
LOAD = "[2026-07-23 10:00:40 TP0] Load weight begin. avail mem=139.06 GB\n"
#: the issue's pool: K+V (219.32 GB) exceed the 139.06 GB free before the weights loaded
HUGE_POOL = (
    "[2026-07-23 10:01:15 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1779712, "
    "K size: 109.66 GB, V size: 109.66 GB\n"
)
#: a pool that fits the device: only the post-capture line can tell it is address space
POOL = (
    "[2026-07-23 10:01:15 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1933312, "
    "K size: 36.88 GB, V size: 36.88 GB\n"
)
POOL_END = "[2026-07-23 10:01:15 TP0] Memory pool end. avail mem=75.40 GB\n"
SIZED = "[2026-07-23 10:02:30 TP0] Post-capture KV sizing: max_total_num_tokens=331776, free memory=40.11 GB\n"
#: 0.5.17's committed line, which also states what the pool commits
COMMITTED = (
    "[2026-07-23 10:02:30 TP0] Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, "
    "#tokens: 331776, KV size: 12.66 GB, avail mem=40.11 GB\n"
)
GIB = 1 << 30


def decoded(lines: list[bytes]) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in lines]


def pool_series(series: MemorySeries) -> dict[tuple[str, str], float]:
    """(metric, allocation_state or "") -> value of the pool series."""
    return {
        (metric.name, labels.get("allocation_state", "")): value
        for metric, labels, value in series.samples()
        if metric.name in ("kvlog_kv_pool_bytes", "kvlog_kv_pool_committed_bytes")
    }


def inference(event: dict[str, Any], name: str = "allocation_state") -> tuple[str, int | None]:
    note = event["migrated"]["inferred"][name]
    return note["rule"], note.get("evidence_line")


def test_follow_publishes_a_pool_larger_than_the_device_as_a_va_bound_when_its_hold_runs_out(tmp_path: Path) -> None:
    """The issue's log with ``--hold 3``: the pool is never published as allocated, and no correction is needed."""
    log = tmp_path / "s.log"
    log.write_text(SERVER_ARGS + LOAD + HUGE_POOL + POOL_END)
    series = MemorySeries()
    with passes(str(log), hold_s=3, observers=[series]) as run:
        run.poll()
        run.clock.now += 3
        run.poll()
        written = decoded(run.events())
        assert pool_series(series) == {("kvlog_kv_pool_bytes", "va_upper_bound"): 2 * 117746528420}
        append(log, SIZED)
        run.poll()
        after = decoded(run.events())
    pool = next(event for event in written if event["event"] == "kv_pool.allocation")
    assert pool["allocation_state"] == "va_upper_bound"
    assert inference(pool) == ("device-memory-bound", 2)  # the Load weight begin line
    assert "149314538045 bytes" in pool["migrated"]["inferred"]["allocation_state"]["evidence"]
    assert inference(pool, "committed_bytes")[0] == "look-ahead-exhausted"  # no line stated them in time
    assert [event["event"] for event in after[len(written) :]] == ["kv_pool.post_capture_sized"]
    assert pool_series(series) == {("kvlog_kv_pool_bytes", "va_upper_bound"): 2 * 117746528420}


def test_a_post_capture_line_after_the_hold_corrects_the_pool_in_events_gauges_and_otel(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_text(SERVER_ARGS + LOAD + POOL + POOL_END)
    series = MemorySeries()
    otel, logs, reader = in_memory()
    size = 2 * 39599598469
    with otel, passes(str(log), hold_s=3, observers=[series, otel]) as run:
        run.poll()
        run.clock.now += 3
        run.poll()
        written = decoded(run.events())
        assert pool_series(series) == {
            ("kvlog_kv_pool_bytes", "allocated"): size,
            ("kvlog_kv_pool_committed_bytes", ""): size,
        }
        append(log, SIZED)
        run.poll()
        events = decoded(run.events())
        assert otel.force_flush()
        records = [readable.log_record for readable in logs.get_finished_logs()]
        gauges = {
            dict(point.attributes or {}).get("allocation_state"): point.value
            for resource in (reader.get_metrics_data() or pytest.fail("no metrics")).resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == "kvlog_kv_pool_bytes"
            for point in metric.data.data_points
        }
    pool = next(event for event in written if event["event"] == "kv_pool.allocation")
    assert (pool["allocation_state"], inference(pool)[0]) == ("allocated", "look-ahead-exhausted")
    assert [event["event"] for event in events[len(written) :]] == [
        "kv_pool.post_capture_sized",
        "kv_pool.state_corrected",
    ]
    correction = events[-1]
    assert correction["ranks"] == pool["ranks"] == {"tp": 0}
    assert correction["timestamp"] == "2026-07-23T10:02:30Z"
    assert correction["migrated"]["file"] == pool["migrated"]["file"] == str(log)
    assert (correction["corrected_event"], correction["corrected_line"]) == ("kv_pool.allocation", 3)
    assert (correction["pool"], correction["label"]) == (pool["pool"], pool["label"])
    assert (correction["previous_allocation_state"], correction["allocation_state"]) == ("allocated", "va_upper_bound")
    assert correction["committed_bytes"] is None
    assert inference(correction) == ("post-capture-after-pool", 5)
    assert pool_series(series) == {("kvlog_kv_pool_bytes", "va_upper_bound"): size}  # nothing claims it is held
    assert gauges == {"va_upper_bound": size}
    assert records[-1].event_name == "kv_pool.state_corrected"
    attributes = dict(records[-1].attributes or {})
    assert attributes["kvlog.corrected_line"] == 3
    assert attributes["kvlog.allocation_state"] == "va_upper_bound"
    assert attributes["kvlog.migrated.inferred.allocation_state.evidence_line"] == 5


def test_a_late_committed_line_gives_the_corrected_pool_its_committed_bytes(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_text(SERVER_ARGS + LOAD + POOL + POOL_END)
    series = MemorySeries()
    with passes(str(log), hold_s=3, observers=[series]) as run:
        run.poll()
        run.clock.now += 3
        run.poll()
        append(log, COMMITTED)
        run.poll()
        correction = decoded(run.events())[-1]
    committed = round(12.66 * GIB)
    assert (correction["event"], correction["committed_bytes"]) == ("kv_pool.state_corrected", committed)
    assert pool_series(series) == {
        ("kvlog_kv_pool_bytes", "va_upper_bound"): 2 * 39599598469,
        ("kvlog_kv_pool_committed_bytes", ""): committed,
    }


def test_a_follower_serves_the_corrected_gauge_on_its_metrics_port(tmp_path: Path) -> None:
    """``kvlog follow --hold 0.2 --metrics-port 0``, the post-capture line appended after the hold ran out."""
    log, output = tmp_path / "s.log", tmp_path / "events.jsonl"
    log.write_text(SERVER_ARGS + LOAD + POOL + POOL_END)

    def scraped(url: str) -> dict[str, float]:
        with urllib.request.urlopen(url, timeout=5) as response:
            exposition = response.read().decode()
        return {
            sample.labels["allocation_state"]: sample.value
            for family in text_string_to_metric_families(exposition)
            for sample in family.samples
            if sample.name == "kvlog_kv_pool_bytes"
        }

    with following(str(log), output, hold_s=0.2, metrics_port=0, poll_s=0.05) as running:
        running.wait_events(3)
        wait_for(lambda: any("serving metrics at" in notice for notice in running.notices), what="the endpoint")
        served = re.search(r"http://\S+/metrics", "\n".join(running.notices))
        assert served is not None
        assert scraped(served.group(0)) == {"allocated": 2 * 39599598469}
        append(log, SIZED)
        running.wait_events(5)
        assert scraped(served.group(0)) == {"va_upper_bound": 2 * 39599598469}
    assert decoded(running.events())[-1]["event"] == "kv_pool.state_corrected"


def test_migrate_decides_the_same_lines_without_a_correction(tmp_path: Path) -> None:
    """With its look-ahead, ``kvlog migrate`` tells both pools at once; a correction comes only past the look-ahead."""
    for pool, rule, line in ((HUGE_POOL, "device-memory-bound", 2), (POOL, "post-capture-after-pool", 5)):
        log = tmp_path / "s.log"
        log.write_text(SERVER_ARGS + LOAD + pool + POOL_END + SIZED)
        out = io.BytesIO()
        assert commands.migrate(str(log), only_events=True, stdout=out).exit_status == 0
        events = decoded(out.getvalue().splitlines())
        assert "kv_pool.state_corrected" not in [event["event"] for event in events]
        allocation = next(event for event in events if event["event"] == "kv_pool.allocation")
        assert (allocation["allocation_state"], *inference(allocation)) == ("va_upper_bound", rule, line)


def test_migrate_past_its_look_ahead_writes_the_same_correction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "LOOKAHEAD_LINES", 3)
    log = tmp_path / "s.log"
    log.write_text(SERVER_ARGS + LOAD + POOL + POOL_END + "filler\n" * 4 + SIZED)
    out = io.BytesIO()
    assert commands.migrate(str(log), only_events=True, stdout=out).exit_status == 0
    correction = decoded(out.getvalue().splitlines())[-1]
    assert (correction["event"], correction["corrected_line"]) == ("kv_pool.state_corrected", 3)
    assert inference(correction) == ("post-capture-after-pool", 9)
    checked = tmp_path / "events.jsonl"
    checked.write_bytes(out.getvalue())
    assert commands.validate(str(checked)).exit_status == 0
    # a catalog-1 stream has no allocation_state to correct: no correction in it
    out = io.BytesIO()
    assert commands.migrate(str(log), only_events=True, to_catalog=1, stdout=out).exit_status == 0
    assert "kv_pool.state_corrected" not in [event["event"] for event in decoded(out.getvalue().splitlines())]
    # output that keeps one line per input line has no place for it either
    out = io.BytesIO()
    assert commands.migrate(str(log), stdout=out).exit_status == 0
    assert len(out.getvalue().splitlines()) == len(log.read_text().splitlines())


def test_the_live_handler_corrects_what_it_wrote(tmp_path: Path) -> None:
    """``kvlog integrate``'s handler, its post-capture record logged after its hold ran out."""
    events = tmp_path / "events.jsonl"
    handler = EventHandler(SGLANG, str(events), ranks={"tp": 0}, hold_s=0.2)
    logger = logging.getLogger("sglang.srt.test.corrections")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)

    def written() -> list[dict[str, Any]]:
        return decoded(events.read_bytes().splitlines()) if events.exists() else []

    try:
        for line in (LOAD, POOL, POOL_END):
            logger.info(SGLANG_PREFIX.split(line.rstrip("\n")).message)
        wait_for(
            lambda: any(e["event"] == "kv_pool.allocation" for e in written()), what="the pool, written as claimed"
        )
        logger.info(SGLANG_PREFIX.split(SIZED.rstrip("\n")).message)
        wait_for(lambda: written()[-1]["event"] == "kv_pool.state_corrected", what="the correction")
    finally:
        handler.close()
        logger.removeHandler(handler)
    pool = next(event for event in written() if event["event"] == "kv_pool.allocation")
    correction = written()[-1]
    assert pool["allocation_state"] == "allocated"
    assert correction["corrected_line"] == pool["migrated"]["line"] == 2  # the handler numbers its records
    assert correction["migrated"]["file"] is None
    assert inference(correction) == ("post-capture-after-pool", 4)
    assert correction["ext"]["logger"] == "sglang.srt.test.corrections"  # the record of the evidence line
    series = MemorySeries()
    for event in written():
        series.observe(event, instance="node")
    assert pool_series(series) == {("kvlog_kv_pool_bytes", "va_upper_bound"): 2 * 39599598469}


def test_a_hybrid_group_written_as_allocated_is_corrected_whole_and_its_draft_is_not(tmp_path: Path) -> None:
    """gpt-oss with EAGLE3 (2026-07, no arena line): SWA and Full sub-pools, their summary, then the draft's pool."""
    corpus = (Path(__file__).parent / "corpus" / "postcapture_before_fix_2026_07.log").read_text().splitlines()
    run_start = next(i for i, line in enumerate(corpus) if "gpt-oss-20b" in line)
    *start_up, sized = corpus[run_start : run_start + 9]
    log = tmp_path / "s.log"
    log.write_text("".join(f"{line}\n" for line in start_up))
    series = MemorySeries()
    with passes(str(log), hold_s=3, observers=[series]) as run:
        run.poll()
        run.clock.now += 3
        run.poll()
        written = len(run.events())
        append(log, f"{sized}\n")
        run.poll()
        events = decoded(run.events())
    corrections = [event for event in events[written:] if event["event"] == "kv_pool.state_corrected"]
    assert [(c["corrected_event"], c["corrected_line"], c["label"]) for c in corrections] == [
        ("kv_pool.allocation", 3, "SWA"),
        ("kv_pool.allocation", 4, "Full"),
        ("kv_pool.swa_summary", 5, None),
    ]
    assert all(inference(c) == ("post-capture-after-pool", 8) for c in corrections)
    states = {
        (metric.name, labels.get("pool", ""), labels["allocation_state"])
        for metric, labels, _ in series.samples()
        if "allocation_state" in labels
    }
    assert states == {
        ("kvlog_kv_pool_bytes", "SWA", "va_upper_bound"),
        ("kvlog_kv_pool_bytes", "Full", "va_upper_bound"),
        ("kvlog_kv_pool_bytes", "#2", "allocated"),  # the draft's pool, really allocated
        ("kvlog_kv_pool_swa_total_bytes", "", "va_upper_bound"),
    }
