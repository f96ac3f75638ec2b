"""The live handler's probe: what it lets by on the server's thread must include every line a rule reads."""

from __future__ import annotations

import string

from kvlog.migration.candidates import MESSAGE_PROBE_CHARACTERS, might_be_read, probe_words


def test_every_probe_word_holds_a_character_the_message_probe_looks_for() -> None:
    missed = [word for word in probe_words() if not any(character in word for character in MESSAGE_PROBE_CHARACTERS)]
    assert missed == []


def test_the_message_probe_looks_for_exactly_its_characters() -> None:
    others = "".join(c for c in string.printable if c not in MESSAGE_PROBE_CHARACTERS)
    assert not might_be_read(others)
    for character in MESSAGE_PROBE_CHARACTERS:
        assert might_be_read(f"{others}{character}{others}"), character


def test_request_lines_pass_by_and_memory_lines_are_read() -> None:
    assert not might_be_read("Decode batch. #running-req: 12, #token: 3456, token usage: 0.05, #queue-req: 0")
    assert might_be_read("KV Cache is allocated. #tokens: 4194304, K size: 32.00 GB, V size: 32.00 GB")
    assert might_be_read("Available KV cache memory: 52.73 GiB")
