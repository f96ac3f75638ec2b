"""The ``convert`` op's units, checked against their definitions (IEC 80000-13 binary, SI decimal), not its own table.

A migration that converts ``mib`` to ``bytes`` must give 1048576 bytes per MiB whatever kvlog's table says;
each expected figure below is computed from the standard's definition of the unit, exactly (``Fraction``).
"""

from __future__ import annotations

from fractions import Fraction
from itertools import product
from typing import Any

import pytest

#: IEC 80000-13: kibi = 2^10, mebi = 2^20, gibi = 2^30; SI: kilo = 10^3, mega = 10^6, giga = 10^9 (bytes)
from kvlog.migration.errors import ApplyError, OpError
from kvlog.migration.ops import compile_op

BYTES: dict[str, Fraction] = {
    "bytes": Fraction(1),
    "kib": Fraction(2**10),
    "mib": Fraction(2**20),
    "gib": Fraction(2**30),
    "kb": Fraction(10**3),
    "mb": Fraction(10**6),
    "gb": Fraction(10**9),
}
#: SI: milli = 10^-3, micro = 10^-6 (seconds)
SECONDS: dict[str, Fraction] = {"s": Fraction(1), "ms": Fraction(1, 10**3), "us": Fraction(1, 10**6)}


def converted(value: Any, source: str, target: str) -> Any:
    """``value`` after a ``convert`` op from ``source`` to ``target``, as a migration step runs it."""
    event: dict[str, Any] = {"size": value}
    compile_op({"op": "convert", "field": "size", "from_unit": source, "to_unit": target}).run(event)
    return event["size"]


@pytest.mark.parametrize(("source", "target"), list(product(BYTES, BYTES)))
def test_every_byte_unit_converts_by_its_definition(source: str, target: str) -> None:
    """A byte-dimension figure is whole: the exact quotient rounded to the nearest unit (half to even), an int."""
    for value in (1, 3, 1.5, 1000):
        expected = round(Fraction(str(value)) * BYTES[source] / BYTES[target])
        result = converted(value, source, target)
        assert (result, type(result)) == (expected, int), (value, source, target)


@pytest.mark.parametrize(("source", "target"), list(product(SECONDS, SECONDS)))
def test_every_time_unit_converts_by_its_definition(source: str, target: str) -> None:
    """Durations stay fractional: a float, the exact quotient correctly rounded."""
    for value in (1, 7, 2.5):
        expected = float(Fraction(str(value)) * SECONDS[source] / SECONDS[target])
        result = converted(value, source, target)
        assert (result, type(result)) == (expected, float), (value, source, target)


@pytest.mark.parametrize(
    ("value", "source", "target", "expected"),
    [
        (1, "mib", "bytes", 1_048_576),
        (1, "kb", "bytes", 1000),
        (1, "mb", "bytes", 1_000_000),
        (1, "gb", "bytes", 1_000_000_000),
        (1, "gib", "bytes", 1_073_741_824),
        (1, "kib", "bytes", 1024),
        (40.41, "gb", "bytes", 40_410_000_000),  # a host pool's decimal GB, from its printed text
        (2048, "kib", "mib", 2),
        (3, "gib", "gb", 3),  # 3.221225472 GB: a byte-dimension figure is a whole number of its unit
        (1500, "ms", "s", 1.5),
        (78.01, "s", "ms", 78010.0),  # `Load weight end. elapsed=78.01 s`
        (250, "us", "ms", 0.25),
    ],
)
def test_figures_a_reader_can_check_by_hand(value: float, source: str, target: str, expected: float) -> None:
    assert converted(value, source, target) == expected


def test_a_float_is_read_by_its_decimal_text_not_its_binary_value() -> None:
    """2.01 s is 2010 ms, not the binary float's 2009.9999999999998; 0.03 ms is 3e-05 s, as printed."""
    assert converted(2.01, "s", "ms") == 2010.0
    assert converted(0.03, "ms", "s") == 3e-05
    assert converted(0.1, "gb", "bytes") == 100_000_000


def test_whole_bytes_round_half_to_even() -> None:
    assert (converted(1.5, "bytes", "bytes"), converted(2.5, "bytes", "bytes")) == (2, 2)
    assert converted(1536, "bytes", "kib") == 2  # 1.5 KiB
    assert converted(2560, "bytes", "kib") == 2  # 2.5 KiB


@pytest.mark.parametrize(("source", "target"), [("gib", "s"), ("ms", "bytes"), ("s", "kb")])
def test_units_of_different_dimensions_do_not_convert(source: str, target: str) -> None:
    with pytest.raises(OpError, match=f"cannot convert {source} to {target}"):
        compile_op({"op": "convert", "field": "size", "from_unit": source, "to_unit": target})


@pytest.mark.parametrize(
    ("source", "target"),
    [("tib", "bytes"), ("bytes", "tib"), ("MiB", "bytes"), ("bytes", "GB"), ("sec", "s"), ("s", "ns")],
)
def test_an_unknown_unit_fails_at_load_time_and_lists_the_known_ones(source: str, target: str) -> None:
    """Unit names are lower-case and exact: a typo or another spelling is not guessed."""
    with pytest.raises(OpError, match="op 'convert': units are bytes, kib, mib, gib, kb, mb, gb, s, ms, us"):
        compile_op({"op": "convert", "field": "size", "from_unit": source, "to_unit": target})


@pytest.mark.parametrize("value", ["1.5", True, [1], {"gib": 1}])
def test_only_numbers_convert(value: Any) -> None:
    with pytest.raises(ApplyError, match=r"size=.* is not a number"):
        converted(value, "gib", "bytes")


def test_an_absent_or_null_figure_stays_as_it_was() -> None:
    op = compile_op({"op": "convert", "field": "size", "from_unit": "gib", "to_unit": "bytes"})
    absent: dict[str, Any] = {"other": 1}
    null: dict[str, Any] = {"size": None}
    op.run(absent)
    op.run(null)
    assert (absent, null) == ({"other": 1}, {"size": None})
    assert (op.kind, op.reads, op.writes, op.drops) == ("convert", ("size",), ("size",), ())
