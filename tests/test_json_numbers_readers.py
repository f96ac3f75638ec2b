"""Every reader of events takes a number as JSON means it: ``5.0`` is 5, ``true`` is not 1.

JSON Schema's ``integer`` accepts any number with no fractional part, so ``"k_bytes": 5.0``,
``"ranks": {"tp": 1.0}`` and ``"pid": 7.0`` are valid and mean 5, rank 1 and process 7. Readers that
asked for a Python ``int`` left such bytes out of ``summarize``'s totals, named a rank ``TP1.0`` or
``TP1`` by whichever line came first, split one process into two, and dropped the event from the
metrics. The reverse held in ``migrate``'s per-rank context, where Python's ``False == 0`` let an
event of rank ``false`` (no rank: it is refused as invalid) decide how rank 0's pool was allocated.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from migration_helpers import READY_V1

from kvlog import commands
from kvlog.metrics.series import MemorySeries
from kvlog.plot.timeline import timelines
from kvlog.schema.event_validator import EventValidator
from kvlog.text.console import console_line
from kvlog.text.prefix import VLLM

WEIGHTS: dict[str, Any] = {
    "event": "weights.load_end",
    "schema_version": 2,
    "timestamp": "2025-06-03T11:21:30Z",
    "level": "info",
    "ranks": {"tp": 1},
    "elapsed_s": 48.9,
    "model_class": "Q",
    "dtype": "torch.bfloat16",
    "avail_bytes": 79478369812,
    "mem_usage_bytes": 4917737554,
    "quantization": None,
}
POOL: dict[str, Any] = {
    "event": "kv_pool.allocation",
    "schema_version": 2,
    "timestamp": "2025-06-03T11:21:32Z",
    "level": "info",
    "ranks": {"tp": 1},
    "layout": "mha",
    "num_tokens": 4194304,
    "k_bytes": 34359738368,
    "v_bytes": 34359738368,
    "label": None,
    "dtype": None,
    "allocation_state": "allocated",
    "pool": None,
    "committed_bytes": None,
}


def summary_rows(tmp_path: Path, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    log = tmp_path / "events.jsonl"
    log.write_bytes(b"".join(orjson.dumps(event) + b"\n" for event in events))
    validated = commands.validate(str(log))
    assert validated.exit_status == 0, validated.findings  # every variant is a valid event
    out = io.BytesIO()
    assert commands.summarize(str(log), output_format="json", stdout=out).exit_status == 0
    document = orjson.loads(out.getvalue())
    rows: list[dict[str, Any]] = document["runs"] if isinstance(document, dict) else document
    return rows


def _without_timing(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{key: value for key, value in row.items() if key != "start"} for row in rows]


@pytest.mark.parametrize(
    "written",
    [
        {"weights": {"mem_usage_bytes": 4917737554.0}, "pool": {"k_bytes": 34359738368.0}},
        {"weights": {"ranks": {"tp": 1.0}}, "pool": {}},
        {"weights": {}, "pool": {"ranks": {"tp": 1.0}}},
        {"weights": {"pid": 7}, "pool": {"pid": 7.0}},
        {"weights": {"pid": 7.0}, "pool": {"pid": 7}},
    ],
)
def test_summarize_reads_whole_floats_as_the_integers_they_are(tmp_path: Path, written: dict[str, Any]) -> None:
    pid = {"pid": 7} if "pid" in written["weights"] else {}
    expected = summary_rows(tmp_path, [{**WEIGHTS, **pid}, {**POOL, **pid}])
    for order in ((0, 1), (1, 0)):
        events = [{**WEIGHTS, **written["weights"]}, {**POOL, **written["pool"]}]
        rows = summary_rows(tmp_path, [events[i] for i in order])
        assert _without_timing(rows) == _without_timing(expected), order


def _series(event: dict[str, Any]) -> list[tuple[str, dict[str, str], float]]:
    series = MemorySeries()
    series.observe(event, instance="i")
    return [(metric.name, labels, value) for metric, labels, value in series.samples()]


def test_the_metrics_keep_an_event_whose_rank_is_a_whole_float_and_label_it_as_the_integer() -> None:
    expected = _series(POOL)
    assert expected
    assert _series({**POOL, "ranks": {"tp": 1.0}}) == expected
    assert _series({**POOL, "ranks": {"tp": True}}) == []


POOL_V1: dict[str, Any] = {
    "event": "kv_pool.allocation",
    "schema_version": 1,
    "timestamp": "2026-07-20T10:00:01Z",
    "level": "info",
    "label": None,
    "layout": "mha",
    "dtype": "torch.bfloat16",
    "num_tokens": 1000000,
    "k_bytes": 10737418240,
    "v_bytes": 10737418240,
}


def migrated_pool(tmp_path: Path, arena_rank: object, pool_rank: int) -> dict[str, Any]:
    log = tmp_path / "old.jsonl"
    lines = [{**READY_V1, "ranks": {"tp": arena_rank}}, {**POOL_V1, "ranks": {"tp": pool_rank}}]
    log.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    out = io.BytesIO()
    commands.migrate(str(log), stdout=out)
    pool: dict[str, Any] = orjson.loads(out.getvalue().splitlines()[-1])
    assert pool["event"] == "kv_pool.allocation"
    pool["migrated"].pop("file")
    return pool


@pytest.mark.parametrize(("arena_rank", "pool_rank"), [(False, 0), (True, 1)])
def test_migrate_keeps_an_event_of_rank_true_or_false_out_of_rank_1_or_0s_context(
    tmp_path: Path, arena_rank: bool, pool_rank: int
) -> None:
    apart = migrated_pool(tmp_path, 7, pool_rank)  # an arena of another rank: no evidence for this pool
    assert migrated_pool(tmp_path, arena_rank, pool_rank) == apart


def test_migrate_takes_an_event_of_rank_1_0_as_rank_1(tmp_path: Path) -> None:
    same = migrated_pool(tmp_path, 1, 1)
    assert same["allocation_state"] == "va_upper_bound"  # the arena before the pool is evidence for it
    assert migrated_pool(tmp_path, 1.0, 1) == same


def _from_a_log(event: dict[str, Any], line: object, original: str, **migrated: Any) -> dict[str, Any]:
    provenance = {"source_format": "sglang-text/2025-01", "file": "server.log", "line": line, "original": original}
    return {**event, "migrated": {**provenance, **migrated}}


def _pool_inference(events: list[dict[str, Any]]) -> tuple[str | None, str | None, str]:
    """Where the picture says the pool's inference rests, the line it quotes there, and the sample's ``at``."""
    invalid: list[dict[str, Any]] = []
    (timeline,) = timelines(events, invalid.append)
    (sample,) = [sample for sample in timeline.samples if sample.event == "kv_pool.allocation"]
    (inference,) = sample.inferred
    return inference.evidence_at, inference.evidence_original, sample.at


@pytest.mark.parametrize(("line", "evidence_line"), [(2.0, 1), (2, 1.0), (2.0, 1.0)])
def test_the_picture_reads_a_line_number_written_as_a_whole_float_as_that_line(
    line: float, evidence_line: float
) -> None:
    inferred = {"allocation_state": {"rule": "arena before the pool", "evidence": "arena 0", "evidence_line": 1}}
    weights = _from_a_log(WEIGHTS, 1, "Load weight end. mem usage=4.58 GB")
    expected = _pool_inference([weights, _from_a_log(POOL, 2, "KV Cache is allocated", inferred=inferred)])
    assert expected == ("server.log:1", "Load weight end. mem usage=4.58 GB", "server.log:2")
    inferred["allocation_state"]["evidence_line"] = evidence_line
    pool = _from_a_log(POOL, line, "KV Cache is allocated", inferred=inferred)
    assert _pool_inference([weights, pool]) == expected


@pytest.mark.parametrize("forged_line", [1, True])
@pytest.mark.parametrize("forged_first", [False, True])
def test_an_invalid_event_never_stands_in_for_the_line_an_inference_quotes(
    forged_line: object, forged_first: bool
) -> None:
    inferred = {"allocation_state": {"rule": "arena before the pool", "evidence": "arena 0", "evidence_line": 1}}
    weights = _from_a_log(WEIGHTS, 1, "Load weight end. mem usage=4.58 GB")
    pool = _from_a_log(POOL, 2, "KV Cache is allocated", inferred=inferred)
    forged = _from_a_log({**WEIGHTS, "level": 7}, forged_line, "not what line 1 said")  # invalid: left out
    events = [forged, weights, pool] if forged_first else [weights, forged, pool]
    assert _pool_inference(events)[1] == "Load weight end. mem usage=4.58 GB"


@pytest.mark.parametrize("rank", [1.0, 1])
def test_a_line_prefix_prints_a_rank_written_as_a_whole_float_as_the_integer(tmp_path: Path, rank: float) -> None:
    """A prefix ``TP1.0`` is read back by no parser of sglang's or vLLM's lines: the rank is 1."""
    event = {**WEIGHTS, "ranks": {"dp": 0, "tp": rank}}
    assert console_line(event).startswith("[2025-06-03 11:21:30 DP0 TP1] ")
    assert VLLM.build(event["timestamp"], {**event["ranks"], "rank": rank}) == (
        "(Worker_DP0_TP1 rank=1 pid=0) INFO 06-03 11:21:30 [kvlog:0] "
    )
    log, out = tmp_path / "events.jsonl", io.BytesIO()
    log.write_bytes(orjson.dumps(event) + b"\n")
    assert commands.migrate(str(log), output_format="legacy", stdout=out).exit_status == 0
    assert out.getvalue().startswith(b"[2025-06-03 11:21:30 DP0 TP1] ")


def test_the_migration_report_counts_a_version_written_as_a_whole_float_with_that_version(tmp_path: Path) -> None:
    log, report = tmp_path / "events.jsonl", tmp_path / "report.json"
    log.write_bytes(orjson.dumps(WEIGHTS) + b"\n" + orjson.dumps({**WEIGHTS, "schema_version": 2.0}) + b"\n")
    assert commands.migrate(str(log), report=str(report), stdout=io.BytesIO()).exit_status == 0
    assert orjson.loads(report.read_bytes())["events_by_event"] == {"weights.load_end@2": 2}


def test_a_message_about_a_value_no_json_holds_still_says_what_is_wrong() -> None:
    """A library caller may hand any Python object: quoting it must not be what fails."""
    cycle: list[Any] = []
    cycle.append(cycle)
    for version in ({(1,): 2}, cycle, object()):
        (violation,) = EventValidator().violations({"event": "kv_arena.ready", "schema_version": version})
        assert violation.message.startswith("unknown version "), violation
