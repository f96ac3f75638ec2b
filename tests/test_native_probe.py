"""The native gate of the live handler (``kvlog._native.Gate``) against its reference, ``might_be_read``.

The same verdict on every line of every corpus and of the format samples, on fuzzed strings (any
character, lone surrogates included) and on very long messages, with and without usage lines; and the
same records handed on by the handler's ``handle`` either way. Skipped where the module is not built,
unless ``KVLOG_NATIVE=1`` says it must be there.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_native_differential import LOGS  # every corpus log and the format samples

from kvlog import native
from kvlog.migration.candidates import MESSAGE_PROBE_CHARACTERS, might_be_read

pytestmark = pytest.mark.skipif(
    native.compiled() is None and os.environ.get(native.ENV) != "1",
    reason="kvlog._native is not built (scripts/native builds it where cargo is installed)",
)


class _Calls:
    """The gate's two ways out, recorded: a candidate, or the reference."""

    def __init__(self) -> None:
        self.candidates: list[tuple[logging.LogRecord, str]] = []
        self.referred: list[logging.LogRecord] = []

    def candidate(self, record: logging.LogRecord, message: str) -> None:
        self.candidates.append((record, message))

    def reference(self, record: logging.LogRecord) -> bool:
        self.referred.append(record)
        return True


def _gate(calls: _Calls, *, usage: bool = False) -> Any:  # the optional module's class
    compiled = native.compiled()
    assert compiled is not None
    return compiled.Gate(MESSAGE_PROBE_CHARACTERS, usage, calls.candidate, calls.reference)


def _same(message: str) -> None:
    for usage in (False, True):
        verdict = _gate(_Calls(), usage=usage).probe(message)
        if verdict is None:  # no UTF-8: the reference decides, so there is nothing to differ
            with pytest.raises(UnicodeEncodeError):
                message.encode()
            continue
        assert verdict == might_be_read(message, usage=usage), (usage, message[:200])


@pytest.mark.parametrize("name", sorted(LOGS))
def test_every_corpus_line_has_the_same_verdict(name: str) -> None:
    for line in LOGS[name].decode(errors="surrogateescape").splitlines():
        _same(line)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(), max_size=200))
def test_fuzzed_strings_have_the_same_verdict(message: str) -> None:
    _same(message)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="éü中\ud800\udfff \n#:" + MESSAGE_PROBE_CHARACTERS + "usage", max_size=60))
def test_strings_near_the_probe_characters_have_the_same_verdict(message: str) -> None:
    _same(message)


def test_very_long_messages_have_the_same_verdict() -> None:
    for tail in ("", "V", "é", "usage", "\udc80"):
        _same("a" * 3_000_000 + tail)
        _same("é" * 1_000_000 + tail)


def _record(msg: object, args: object = ()) -> logging.LogRecord:
    record = logging.LogRecord("sglang.srt.managers.scheduler", logging.INFO, "x.py", 1, "", None, None)
    record.msg, record.args = msg, args  # type: ignore[assignment]  # what a server may hand, whatever its type
    return record


class _Str(str):
    __slots__ = ()


def test_the_gate_hands_on_what_the_reference_would() -> None:
    calls = _Calls()
    gate = _gate(calls)
    read, passed = _record("KV Cache is allocated. K size: 1.00 GB"), _record("Decode batch, #running-req: 1")
    formatted, other = _record("%s", ("Memory pool",)), _record(12)
    subclass, surrogate = _record(_Str("Decode")), _record("Decode \ud800")
    for record in (read, passed, formatted, other, subclass, surrogate):
        assert gate.handle(record) is True
    assert calls.candidates == [(read, "KV Cache is allocated. K size: 1.00 GB")]
    assert calls.referred == [formatted, other, subclass, surrogate]


def test_the_gate_never_raises_an_exception_into_the_server() -> None:
    def failing(record: logging.LogRecord, message: str) -> None:
        raise RuntimeError(message)

    compiled = native.compiled()
    assert compiled is not None
    gate = compiled.Gate(MESSAGE_PROBE_CHARACTERS, False, failing, failing)
    assert gate.handle(_record("Memory pool end")) is True
    assert gate.handle(object()) is True  # no msg, no args


def test_the_handler_takes_the_gate_only_where_the_native_module_is_selected(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvlog.integrate.handler import EventHandler  # noqa: PLC0415 - loads the migrations: only this test needs it
    from kvlog.integrate.servers import SGLANG  # noqa: PLC0415

    compiled = EventHandler(SGLANG, os.devnull)
    monkeypatch.setenv(native.ENV, "0")
    reference = EventHandler(SGLANG, os.devnull)
    try:
        assert "handle" in compiled.__dict__
        assert "handle" not in reference.__dict__
    finally:
        compiled.close()
        reference.close()


def test_the_gate_keeps_no_reference_to_what_it_handles() -> None:
    """Its body counts references by hand (the raw C API, ``native/src/probe.rs``): none gained or lost."""
    import sys  # noqa: PLC0415 - only this test counts references

    def failing(record: logging.LogRecord, message: str = "") -> None:
        raise RuntimeError(message)

    records = [_record(m, a) for m, a in (("KV Cache is allocated.", ()), ("Decode", ()), ("%s", ("x",)), (12, ()))]
    for candidate, reference in ((lambda r, m: None, lambda r: True), (failing, failing)):
        compiled = native.compiled()
        assert compiled is not None
        handle = compiled.Gate(MESSAGE_PROBE_CHARACTERS, False, candidate, reference).handle
        for record in records:
            counts = sys.getrefcount(record), sys.getrefcount(record.msg), sys.getrefcount(record.args)
            for _ in range(100):
                assert handle(record) is True
            assert (sys.getrefcount(record), sys.getrefcount(record.msg), sys.getrefcount(record.args)) == counts
