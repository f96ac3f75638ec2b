"""A printed figure read with integers gives what ``Decimal`` gave, for every unit and precision a wording uses.

``read_figure`` and ``BYTES.read`` once multiplied a ``Decimal`` and rounded it half to even; they now do
it in integers (``kvlog.text.units.whole_units``), which must give the same bytes and the same half-width
on every figure a template's capture admits: the ``Decimal`` computation below is the oracle, in the
default context (28 significant digits, whose rounding of a long product came first and still does).
"""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_HALF_EVEN, Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from kvlog.text.template import BYTE_UNITS, GIB_ROUND2, GROUPED, UNITS, read_figure
from kvlog.text.units import _IEC_STEPS, BYTES, whole_units


def decimal_figure(text: str, unit: str) -> tuple[int | float, int]:
    """``read_figure`` as it was: ``Decimal`` arithmetic."""
    per_unit = UNITS[unit][0]
    number = Decimal(text)
    if unit not in BYTE_UNITS:
        return float(number), 0
    value = int((number * per_unit).to_integral_value(ROUND_HALF_EVEN))
    decimals = UNITS[unit][1] if unit == GIB_ROUND2 else -int(number.as_tuple().exponent)
    if unit == "kib":
        return value, 0
    return value, int((Decimal(per_unit) / 2 / Decimal(10) ** decimals).to_integral_value(ROUND_CEILING))


def decimal_bytes(text: str) -> tuple[int, int]:
    """``BYTES.read`` as it was."""
    number_text, suffix = text.rsplit(" ", 1)
    factor = dict(_IEC_STEPS)[suffix]
    number = Decimal(number_text)
    value = int((number * factor).to_integral_value(ROUND_HALF_EVEN))
    decimals = max(0, -int(number.as_tuple().exponent))
    if factor == 1:
        return value, 0
    return value, int((factor / 2 / Decimal(10) ** decimals).to_integral_value(ROUND_CEILING))


def printed(whole_digits: int, most_decimals: int, *, signed: bool = True) -> st.SearchStrategy[str]:
    """Figures as a capture admits them: an optional sign, up to ``whole_digits`` digits, up to ``most_decimals``."""
    digits = st.text("0123456789", min_size=1, max_size=whole_digits)
    decimals = st.text("0123456789", min_size=1, max_size=most_decimals)
    fraction = st.one_of(st.just(""), decimals.map(lambda d: f".{d}"))
    # halves are where rounding differs: 5 followed by zeros, after any digit
    halves = st.tuples(digits, st.integers(0, most_decimals - 1)).map(lambda h: f"{h[0]}.{'0' * h[1]}5")
    sign = st.sampled_from(["", "-"]) if signed else st.just("")
    return st.tuples(sign, st.one_of(st.tuples(digits, fraction).map("".join), halves)).map("".join)


FIGURE_UNITS = sorted(unit for unit in UNITS if unit != GROUPED)


@settings(max_examples=600, deadline=None)
@given(unit=st.sampled_from(FIGURE_UNITS), text=printed(15, 20))
def test_every_unit_reads_a_figure_as_decimal_arithmetic_did(unit: str, text: str) -> None:
    if unit == "gib4":  # exactly four decimals: the capture admits no other
        whole, _, decimals = text.partition(".")
        text = f"{whole}.{(decimals + '0000')[:4]}"
    assert read_figure(text, unit) == decimal_figure(text, unit)


@settings(max_examples=400, deadline=None)
@given(text=printed(20, 9), suffix=st.sampled_from([suffix for suffix, _ in _IEC_STEPS]))
def test_every_iec_unit_reads_a_figure_as_decimal_arithmetic_did(text: str, suffix: str) -> None:
    assert BYTES.read(f"{text} {suffix}") == decimal_bytes(f"{text} {suffix}")
    assert read_figure(f"{text} {suffix}", "iec") == decimal_bytes(f"{text} {suffix}")


@settings(max_examples=400, deadline=None)
@given(text=printed(40, 40), factor=st.integers(1, 2**80))
def test_products_longer_than_the_decimal_context_round_there_first_as_decimal_did(text: str, factor: int) -> None:
    """Beyond 28 significant digits ``Decimal`` rounded the product before the whole number: so do the integers."""
    expected = int((Decimal(text) * factor).to_integral_value(ROUND_HALF_EVEN))
    assert whole_units(text, factor)[0] == expected


def test_halves_round_to_even_and_the_half_width_follows_the_printed_decimals() -> None:
    gib = 1 << 30
    assert read_figure("0.5", "f2") == (0.5, 0)
    assert whole_units("2.5", 1) == (2, 1)
    assert whole_units("3.5", 1) == (4, 1)
    assert whole_units("-2.5", 1) == (-2, 1)
    assert read_figure("1.00", "gib2") == (gib, -(-gib // 200))
    assert read_figure("61.5", "gib_round2") == (round(61.5 * gib), -(-gib // 200))
