"""What the live handler must not lose, and what it counts when it does: odd messages, failed writes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from test_integrate_handler import START_UP, attached, decoded

from kvlog.integrate.handler import EventHandler
from kvlog.integrate.servers import SGLANG


def test_a_message_holding_a_lone_surrogate_is_written_escaped_and_loses_no_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``str`` can hold what UTF-8 cannot encode; the batch it came in must not be lost with it."""
    logger, handler, events = attached(tmp_path)
    for message in START_UP:
        logger.info(message.replace("type=LlamaFor", "type=Llama\ud800\udc80For"))
    handler.close()
    written = decoded(events)
    assert len(written) == len(START_UP)
    load_end = next(e for e in written if e["event"] == "weights.load_end")
    assert load_end["model_class"] == "Llama\\ud800\\udc80ForCausalLM"
    assert (handler.written, handler.dropped) == (len(START_UP), 0)
    assert capsys.readouterr().err == ""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full, a file whose every flush fails")
def test_events_lost_in_a_flush_that_failed_count_as_dropped_not_written(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Writes to a full disk are buffered and fail only when flushed: what the buffer held is dropped."""
    handler = EventHandler(SGLANG, "/dev/full", ranks={"tp": 0})
    for message in START_UP:
        handler.handle(logging.makeLogRecord({"name": "sglang.srt", "msg": message, "levelno": logging.INFO}))
    handler.close()
    assert (handler.written, handler.dropped) == (0, len(START_UP))
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith("kvlog: /dev/full: cannot write events: [Errno 28]")
    assert said[1:] == [
        f"kvlog: {len(START_UP)} records dropped (the queue was full or the events could not be written)"
    ]
