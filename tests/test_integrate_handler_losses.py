"""What the live handler must not lose, and what it counts when it does: odd messages, failed writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_integrate_handler import START_UP, attached, decoded


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
