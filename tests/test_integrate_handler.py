"""The live handler on its own (``EventHandler``): the bounded look-ahead, and a handler that was closed."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import orjson
from follow_helpers import CORPUS, wait_for

from kvlog.integrate.handler import EventHandler
from kvlog.integrate.servers import SGLANG
from kvlog.text.prefix import SGLANG as SGLANG_PREFIX

#: one rank's start-up in a build that sized its pools after CUDA-graph capture: the pool waits for that line
START_UP = [
    SGLANG_PREFIX.split(line).message
    for line in (CORPUS / "postcapture_before_fix_2026_07.log").read_text().splitlines()[:12]
    if " TP0]" in line
]


def attached(tmp_path: Path, **options: object) -> tuple[logging.Logger, EventHandler, Path]:
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
    assert all("evidence_line" not in inference for inference in inferred.values())  # no file has those lines


def test_a_closed_handler_reads_no_more_records(tmp_path: Path) -> None:
    logger, handler, events = attached(tmp_path)
    logger.info(START_UP[0])
    handler.close()
    written = decoded(events)
    assert [e["event"] for e in written] == ["weights.load_begin"]
    threads = threading.active_count()
    for message in START_UP:
        logger.info(message)
    time.sleep(0.2)
    assert decoded(events) == written
    assert threading.active_count() == threads  # no worker started again
