"""A server's line prefix reads back what kvlog wrote in it.

The console writes sglang's prefix (``[2026-01-02 03:04:05 DP0 TP1] ``) and ``kvlog migrate`` reads it
back from the same object, so a line kvlog printed migrates to the timestamp (to the second, all
that sglang's prefix prints) and ranks of the event it was printed for, whatever the rank tags.
"""

from __future__ import annotations

import re
from datetime import datetime

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kvlog.text.console import console_line
from kvlog.text.prefix import SGLANG
from kvlog.text.wording import render_message

#: rank tags as the envelope holds them (lower case: ``tp``, ``attn_cp``, ``moe_dp``), each a rank
RANKS = st.dictionaries(st.from_regex(r"[a-z][a-z_]{0,31}", fullmatch=True), st.integers(0, 999_999), max_size=16)
MOMENTS = st.datetimes(min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59))
#: a message keeps no trailing blanks (a carriage return or a space at the end is the line's, not its)
MESSAGES = st.text(st.characters(exclude_categories=("Cs",)), max_size=80).map(lambda m: m.rstrip(" \t\r\n"))
#: what sglang's custom logging format puts after the bracket, and so is read as a level
LEVEL_HEADER = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) ")
#: what sglang up to 0.2.13 opened a message with, and so is read as a rank
MESSAGE_RANK = re.compile(r"\[(gpu_id|gpu|rank)=[0-9]{1,6}\] ")


def rfc3339(moment: datetime) -> str:
    return moment.isoformat(timespec="microseconds") + "Z"


@settings(max_examples=500, deadline=None)
@given(MOMENTS, RANKS, MESSAGES)
def test_sglang_prefix_reads_back_what_it_built(moment: datetime, ranks: dict[str, int], message: str) -> None:
    assume(not LEVEL_HEADER.match(message) and not MESSAGE_RANK.match(message))
    split = SGLANG.split(SGLANG.build(rfc3339(moment), ranks) + message)
    assert split.timestamp == moment.replace(microsecond=0).isoformat() + "Z"
    assert list(split.ranks.items()) == list(ranks.items()), "same tags, same ranks, same order"
    assert split.level is None
    assert split.message == message


@given(MESSAGES)
def test_no_time_and_no_rank_is_no_prefix(message: str) -> None:
    assume(not message.startswith("["))
    assert SGLANG.build(None, None) == SGLANG.build(None, {}) == ""
    split = SGLANG.split(message)
    assert (split.timestamp, split.ranks, split.level, split.message) == (None, {}, None, message)


@settings(max_examples=200, deadline=None)
@given(MOMENTS, RANKS)
def test_a_console_line_migrates_to_its_events_time_and_ranks(moment: datetime, ranks: dict[str, int]) -> None:
    event = {
        "event": "kv_arena.closed",
        "schema_version": 1,
        "timestamp": rfc3339(moment),
        "level": "info",
        "ranks": ranks,
        "arena_id": "7_0",
        "released_bytes": 3 << 30,
    }
    split = SGLANG.split(console_line(event))
    assert split.timestamp == moment.replace(microsecond=0).isoformat() + "Z"
    assert split.ranks == ranks
    assert split.message == render_message(event)


def test_sglang_custom_format_level_and_fraction_are_read() -> None:
    split = SGLANG.split("[2026-01-02 03:04:05,123 DP0 ATTN_CP5] WARNING scheduler.py:88: Memory pool end.\r\n")
    assert split.timestamp == "2026-01-02T03:04:05.123Z"
    assert split.ranks == {"dp": 0, "attn_cp": 5}
    assert split.level == "warning"
    assert split.message == "Memory pool end."
