"""The live handler on its own (``EventHandler``): the bounded look-ahead, and a handler closed while still in use."""

from __future__ import annotations

import json
import logging
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson
import pytest
from follow_helpers import CORPUS, wait_for
from prometheus_client.parser import text_string_to_metric_families

import kvlog.metrics
from kvlog import commands
from kvlog.integrate.handler import EventHandler
from kvlog.integrate.servers import SGLANG
from kvlog.metrics import MetricsEndpointError
from kvlog.text.prefix import SGLANG as SGLANG_PREFIX

#: one rank's start-up in a build that sized its pools after CUDA-graph capture: the pool waits for that line
START_UP = [
    SGLANG_PREFIX.split(line).message
    for line in (CORPUS / "postcapture_before_fix_2026_07.log").read_text().splitlines()[:12]
    if " TP0]" in line
]
#: a vLLM memory line: its pool's capacity, written at once (nothing waits for a later line)
VLLM_BLOCKS = "# GPU blocks: 2048, # CPU blocks: 512"


def attached(tmp_path: Path, **options: object) -> tuple[logging.Logger, EventHandler, Path]:
    tmp_path.mkdir(exist_ok=True)
    events = tmp_path / "events.jsonl"
    handler = EventHandler(SGLANG, str(events), ranks={"tp": 0}, **options)  # type: ignore[arg-type]
    logger = logging.getLogger(f"sglang.srt.test.{tmp_path.name}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return logger, handler, events


def decoded(events: Path) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in events.read_bytes().splitlines()] if events.exists() else []


def test_a_pool_waiting_for_its_post_capture_line_is_written_after_the_hold(tmp_path: Path) -> None:
    logger, handler, events = attached(tmp_path, hold_s=0.5)
    try:
        for message in START_UP:
            logger.info(message)
        wait_for(lambda: any(e["event"] == "kv_pool.allocation" for e in decoded(events)), what="the held pool")
    finally:
        handler.close()
    pool = next(e for e in decoded(events) if e["event"] == "kv_pool.allocation")
    inferred = pool["migrated"]["inferred"]  # type: ignore[index]
    assert pool["allocation_state"] == "va_upper_bound"
    assert inferred["committed_bytes"]["rule"] == "look-ahead-exhausted"
    assert "0.5 s" in inferred["committed_bytes"]["evidence"]
    arena = 1 + next(i for i, message in enumerate(START_UP) if message.startswith("KvVmmArena"))
    assert inferred["allocation_state"]["evidence_line"] == arena  # lines number the records the process logged
    assert pool["migrated"]["file"] is None


def test_a_handler_closed_by_a_new_configuration_starts_afresh_when_records_still_reach_it(tmp_path: Path) -> None:
    """uvicorn's dictConfig in vLLM's API server closes every handler but leaves vLLM's loggers theirs."""
    logger, handler, events = attached(tmp_path / "closed")
    logger.info(START_UP[0])
    handler.close()
    assert [e["event"] for e in decoded(events)] == ["weights.load_begin"]
    for message in START_UP:
        logger.info(message)
    handler.close()
    fresh_logger, fresh, fresh_events = attached(tmp_path / "fresh")
    for message in START_UP:
        fresh_logger.info(message)
    fresh.close()
    names = [e["event"] for e in decoded(fresh_events)]
    assert len(names) == len(START_UP)
    assert [e["event"] for e in decoded(events)] == ["weights.load_begin", *names]


def test_a_metrics_port_another_process_took_moves_up_and_says_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM's engine core and its TP-0 worker, or two DP ranks of sglang, share a local rank: the second moves up."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        logger, handler, _ = attached(tmp_path, metrics_port=port)
        logger.info(START_UP[0])
        handler.close()
    said = capsys.readouterr().err
    served = re.search(r"serving metrics of pid [0-9]+ at http://127\.0\.0\.1:([0-9]+)/metrics", said)
    assert served is not None, said
    assert port < int(served.group(1)) < port + 64


def test_a_metrics_port_serves_the_gauges_of_the_events_written_while_the_server_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--metrics-port``: the process's endpoint counts the events its handler wrote, scraped before it ends."""
    logger, handler, events = attached(tmp_path, metrics_port=0)
    try:
        for message in START_UP[:2]:
            logger.info(message)
        wait_for(lambda: len(decoded(events)) == 2, what="the two events")
        served = re.search(r"serving metrics of pid [0-9]+ at (http://\S+/metrics)", capsys.readouterr().err)
        assert served is not None
        with urllib.request.urlopen(served.group(1), timeout=5) as response:
            exposition = response.read().decode()
    finally:
        handler.close()
    counted = {
        (sample.labels["event"], sample.labels["server"]): sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == "kvlog_events_total"
    }
    assert counted == {("weights.load_begin", "sglang"): 1, ("weights.load_end", "sglang"): 1}


def test_a_kept_configuration_whose_root_is_the_logger_named_empty_keeps_its_root_handlers(tmp_path: Path) -> None:
    kept = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"console": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}},
        "loggers": {"": {"handlers": ["console"], "level": "INFO"}},
    }
    (tmp_path / "kept.json").write_text(json.dumps(kept))
    merged = commands.integrate("sglang", events=str(tmp_path / "kv.jsonl"), keep=tmp_path / "kept.json")
    assert "root" not in merged
    assert merged["loggers"][""]["handlers"] == ["console", "kvlog"]
    (tmp_path / "merged.json").write_text(json.dumps(merged))
    loaded = "import json, logging.config, sys; logging.config.dictConfig(json.load(open(sys.argv[1])));"
    shown = "print([type(h).__name__ for h in logging.getLogger().handlers])"
    done = subprocess.run(
        [sys.executable, "-c", loaded + shown, str(tmp_path / "merged.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "['StreamHandler', 'EventHandler']"


def test_the_records_of_written_events_are_not_kept(tmp_path: Path) -> None:
    """A server runs for weeks: the handler keeps a record only while its line's event may still be written."""
    logger, handler, events = attached(tmp_path)
    try:
        for _ in range(3):
            logger.info(START_UP[0])
        wait_for(lambda: len(decoded(events)) == 3, what="the three events")
        reading = handler._reading
        assert reading is not None
        assert reading.records == {}
        assert not reading.lines
    finally:
        handler.close()


def test_while_a_pool_waits_for_its_post_capture_line_only_the_records_from_it_on_are_kept(tmp_path: Path) -> None:
    """The lines before a held pool are written: their records go, while the pool waits out its hold."""
    logger, handler, events = attached(tmp_path)
    pool = 1 + START_UP.index(next(m for m in START_UP if m.startswith("KV Cache is allocated")))
    try:
        logger.info("\n".join(START_UP))  # one record, one batch: every line read before the hold begins
        wait_for(lambda: len(decoded(events)) == pool - 1, what="the events before the held pool")
        reading = handler._reading
        assert reading is not None
        assert list(reading.lines) == list(range(pool, len(START_UP) + 1))
        assert sorted(reading.records) == list(reading.lines)
    finally:
        handler.close()


@pytest.mark.parametrize(
    ("local_rank", "ranks", "port", "tried"),
    [
        ("2", {"tp": 0}, 9000, range(9002, 9066)),  # LOCAL_RANK first
        (None, {"tp": 1}, 9000, range(9001, 9065)),  # else the TP rank
        (None, {}, 9000, range(9000, 9064)),  # a process without ranks: the port itself
        ("2", {"tp": 0}, 0, range(1)),  # port 0: any free port, whatever the rank
    ],
    ids=["local rank", "tp rank", "no rank", "any port"],
)
def test_the_ports_a_process_tries_for_its_metrics(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    local_rank: str | None,
    ranks: dict[str, int],
    port: int,
    tried: range,
) -> None:
    """The handler's port plus the process's local rank, then the next 63; where none is free, no metrics, said."""
    asked: list[int] = []

    def taken(_series: object, host: str, port: int) -> None:
        asked.append(port)
        raise MetricsEndpointError(f"cannot serve metrics on {host}:{port}: Address already in use")

    monkeypatch.setattr(kvlog.metrics, "start_endpoint", taken, raising=False)
    if local_rank is None:
        monkeypatch.delenv("LOCAL_RANK", raising=False)
    else:
        monkeypatch.setenv("LOCAL_RANK", local_rank)
    handler = EventHandler(SGLANG, str(tmp_path / "kv.jsonl"), ranks=ranks, metrics_port=port)
    handler.handle(logging.makeLogRecord({"name": "sglang.srt", "msg": START_UP[0], "levelno": logging.INFO}))
    handler.close()
    assert asked == list(tried)
    assert capsys.readouterr().err == (
        f"kvlog: no metrics for this process: cannot serve metrics on 127.0.0.1:{tried[-1]}: Address already in use\n"
    )
    assert handler.written == 1  # the events are written all the same


DECODE = (
    "Decode batch. #running-req: 8, #token: 62531, token usage: 0.12, gen throughput (token/s): 186.64, #queue-req: 0"
)


def test_usage_lines_are_read_only_with_usage_and_served_as_a_gauge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kvlog integrate --usage``: a decode batch's usage becomes an event and the process's gauge."""
    logger, handler, events = attached(tmp_path / "without")
    try:
        logger.info(START_UP[0])
        logger.info(DECODE)
        wait_for(lambda: len(decoded(events)) == 1, what="the load line's event")
    finally:
        handler.close()
    assert [event["event"] for event in decoded(events)] == ["weights.load_begin"]

    logger, handler, events = attached(tmp_path / "with", metrics_port=0, usage="all")
    try:
        logger.info(DECODE)
        wait_for(lambda: len(decoded(events)) == 1, what="the usage event")
        served = re.search(r"serving metrics of pid [0-9]+ at (http://\S+/metrics)", capsys.readouterr().err)
        assert served is not None
        with urllib.request.urlopen(served.group(1), timeout=5) as response:
            exposition = response.read().decode()
    finally:
        handler.close()
    (event,) = decoded(events)
    assert (event["event"], event["fraction"], event["used_tokens"]) == ("kv_pool.usage", 0.12, 62531)
    usage = {
        sample.labels["pool"]: sample.value
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == "kvlog_kv_pool_usage_ratio"
    }
    assert usage == {"full": 0.12}
