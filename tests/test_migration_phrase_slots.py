"""A text slot the server fills with a phrase (issue 32, class 6): read to the template's next words, never past them.

sglang prints ``Capture {capture_name} CUDA graph end.`` with ``capture_name`` a phrase (``target
decode``); a slot that took one word dead-lettered the line. The class is every unit-less text slot
followed by a space and the template's own words, in every ``migrations/*-text`` file.
"""

from __future__ import annotations

import json

import pytest
from migration_helpers import migrated

from kvlog.text.template import GIB, FieldSyntax, Template

SGLANG = "[2026-07-01 10:00:00 TP0] "


@pytest.mark.parametrize(
    "message",
    [
        "Capture target decode CUDA graph end. elapsed=2.10 s, mem usage=0.50 GB, avail mem=10.00 GB.",
        "Capture target decode CUDA graph begin. backend=flashinfer, num_tokens=512, avail mem=10.50 GB",
        "Capture draft extend piecewise CUDA graph end. elapsed=1.00 s, mem usage=0.10 GB, avail mem=9.90 GB.",
    ],
)
def test_a_line_whose_slot_the_server_filled_with_a_phrase_is_read_not_dead_lettered(message: str) -> None:
    """The capture lines are events since issue 33: the phrase is read up to the template's next words."""
    data = (SGLANG + message + "\n").encode()
    out, _, dead = migrated(data)
    assert dead == []
    (event,) = [json.loads(line) for line in out.splitlines()]
    assert event["event"] in ("cuda_graph.captured", "cuda_graph.capture_progress")
    assert event["avail_bytes"] == round(float(message.rpartition("avail mem=")[2].split()[0]) * GIB)


def test_a_companion_line_reads_a_multi_word_label_before_its_next_words() -> None:
    line = (
        SGLANG + "HiCache full attention host pool (1024 tokens) is smaller than the device pool (2048 tokens);"
        "L2 cache effectiveness is reduced.Consider increasing --hicache-ratio (or --hicache-size) for higher L2 "
        "cache hit rate.\n"
    ).encode()
    out, report, dead = migrated(line)
    assert (out, dead, report.companions["note"]) == (line, [], 1)
    parser = Template("x", "HiCache {label} host pool ({host_tokens} tokens) is smaller").parser(
        {"host_tokens": FieldSyntax("integer")}
    )
    parsed = parser.parse("HiCache full attention host pool (1024 tokens) is smaller")
    assert parsed is not None
    assert parsed.fields == {"label": "full attention", "host_tokens": 1024}


def test_a_phrase_ends_where_the_templates_next_words_first_appear() -> None:
    """A line saying those words twice is refused, never read with the first of them and a figure swallowed."""
    parser = Template("x", "HiCache {label} host pool ({host_tokens} tokens) end").parser(
        {"host_tokens": FieldSyntax("integer")}
    )
    assert parser.parse("HiCache a host pool (1 tokens) host pool (2 tokens) end") is None
    parsed = parser.parse("HiCache swa host pool (3 tokens) end")
    assert parsed is not None
    assert parsed.fields == {"label": "swa", "host_tokens": 3}


def test_a_slot_followed_by_another_slot_or_the_end_still_takes_one_word() -> None:
    parser = Template("x", "Capture {a} {b} end").parser({})
    parsed = parser.parse("Capture one two three end")
    assert parsed is not None
    assert parsed.fields == {"a": "one", "b": "two three"}
    assert Template("x", "Pool {name}").parser({}).parse("Pool two words") is None


def test_a_slot_right_after_a_skip_takes_one_word_and_the_skip_the_rest() -> None:
    """vLLM's statistics line: ``{_} {device} KV cache usage`` reads the device, not the throughput before it."""
    parser = Template("x", "Avg prompt throughput: {_} {device} KV cache usage: {fraction}%{_}").parser(
        {"fraction": FieldSyntax("number")}
    )
    line = "Avg prompt throughput: 0.0 tokens/s, Running: 1 reqs, GPU KV cache usage: 3.2%, CPU KV cache usage: 0.0%."
    parsed = parser.parse(line)
    assert parsed is not None
    assert parsed.fields == {"device": "GPU", "fraction": 3.2}


def test_a_line_that_only_begins_as_a_phrase_wording_does_is_no_cut_of_it() -> None:
    """A phrase takes any text, so ``Capture …`` ending anywhere would otherwise be a cut of ``Capture {x} begin.``."""
    parser = Template("x", "Capture {name} begin. This can take up to several minutes. avail mem={avail}").parser({})
    assert not parser.cut("Capture Full CUDA graph begin. backend=abc, num_tokens=8, avail mem=37.42 GB")
    assert parser.cut("Capture Full CUDA graph begin. This can take up to several")  # a real cut still is one
