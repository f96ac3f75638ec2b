"""Figures for people: byte counts and durations in the unit that shows them, to 3 significant digits.

kvlog's own console lines (arena commits, sleep and wake, a host arena) carry sizes from one byte to
exabytes and durations from nanoseconds to days. Printed raw (``14204.838999999998 us``,
``size=2097152 B``) the magnitude is lost in digits; printed in one fixed unit (``0.0 GiB``) a small
value disappears. A figure here is written in the largest unit it reaches (``14.2 ms``, ``2.00 MiB``,
``512 B``), so it never has more than 3 significant digits and a non-zero value never reads as zero.

The wordings sglang printed keep their fixed units (``{:.2f} GB``): monitoring parses them, and
``kvlog.text.template`` writes them exactly. Reading a scaled figure back gives the value and, for bytes,
the half-width its rounding hides, as for sglang's figures.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal

#: the significant digits of ``decimal``'s default context, in which the figures were read before: a product
#: longer than that was rounded to it first (half to even), then to a whole number, and still is
_DECIMAL_DIGITS = 28


def _half_even(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` (non-negative) rounded to a whole number, half to even."""
    quotient, remainder = divmod(numerator, denominator)
    twice = 2 * remainder
    return quotient + (twice > denominator or (twice == denominator and quotient & 1))


def whole_units(text: str, factor: int) -> tuple[int, int]:
    """A printed decimal (``-?digits[.digits]``) times ``factor``, rounded half to even; and its count of decimals.

    Integer arithmetic, with what ``Decimal(text) * factor`` then ``to_integral_value(ROUND_HALF_EVEN)``
    gave in the default context: the product rounded to 28 significant digits (half to even) before
    it is rounded to a whole number. Every figure of a memory line is read here: a ``Decimal`` costs
    several times as much (``tests/test_text_figures.py`` holds the two to the same answer).
    """
    negative = text.startswith("-")
    whole, _, decimals = text.removeprefix("-").partition(".")
    product = int(whole + decimals) * factor
    exponent = -len(decimals)
    excess = len(str(product)) - _DECIMAL_DIGITS if product >= 10**_DECIMAL_DIGITS else 0
    if excess > 0:
        product, exponent = _half_even(product, 10**excess), exponent + excess
    value = product * 10**exponent if exponent >= 0 else _half_even(product, 10**-exponent)
    return (-value if negative else value), len(decimals)


def half_width(factor: int, decimals: int) -> int:
    """The bytes a figure with ``decimals`` decimals of a ``factor``-byte unit may hide: half its last digit, up."""
    last_digit: int = 10**decimals
    return -(-factor // (2 * last_digit))


@dataclass(frozen=True)
class Scale:
    """Units of one dimension, smallest first, each with its size in the base unit the event stores."""

    steps: tuple[tuple[str, Decimal], ...]
    #: values are whole base units (bytes): those below the second unit are printed exactly
    whole: bool
    #: a regular expression for a printed figure, unsigned and bounded (parsers must stay linear); a
    #: parser reads a sign only where the field's schema lets it be negative
    pattern: str

    def format(self, value: float) -> str:
        """``value`` (in the base unit) in the largest unit it reaches, to 3 significant digits."""
        sign = "-" if value < 0 else ""
        size = abs(value)
        if size == 0:
            return f"0 {next(suffix for suffix, factor in self.steps if factor == 1)}"
        if self.whole and size < self.steps[1][1]:
            return f"{sign}{int(size)} {self.steps[0][0]}"
        index = max([i for i, (_, factor) in enumerate(self.steps) if size >= factor] or [0])
        while True:
            suffix, factor = self.steps[index]
            text = significant(size / float(factor))
            if index + 1 < len(self.steps) and Decimal(text) * factor >= self.steps[index + 1][1]:
                # rounding reached the next unit: 1024 KiB is 1.00 MiB, and 59.95 s (60.0 s) is 1.00 min,
                # not 0.999 min: the next unit shows the rounded figure, which reads back the same
                index, size = index + 1, float(Decimal(text) * factor)
                continue
            return f"{sign}{text} {suffix}"

    def read(self, text: str) -> tuple[int | float, int]:
        """A printed figure -> (value in the base unit, half-width in base units of what its rounding hides).

        The half-width is given for whole units (bytes) only; durations are read as the float they say.
        """
        number_text, suffix = text.rsplit(" ", 1)
        factor = dict(self.steps)[suffix]
        if not self.whole:
            return float(Decimal(number_text) * factor), 0
        value, decimals = whole_units(number_text, int(factor))
        return value, 0 if factor == 1 else half_width(int(factor), decimals)


def significant(x: float) -> str:
    """A non-negative number with 3 significant digits (whole numbers up to 4 digits stay whole)."""
    if x == 0:
        return "0"
    if x >= 1:
        for decimals in (2, 1, 0):
            text = f"{x:.{decimals}f}"
            if decimals == 0 or float(text) < 10 ** (3 - decimals):
                return text
    decimals = 2 - math.floor(math.log10(x))
    if decimals > 12:  # too small for 3 significant digits in 12 decimals
        return f"{x:.2e}"
    text = f"{x:.{decimals}f}"
    if float(text) >= 1:
        return significant(float(text))
    return text if float(text) != 0 else f"{x:.2e}"


def _alternatives(steps: tuple[tuple[str, Decimal], ...]) -> str:
    return "|".join(re.escape(suffix) for suffix, _ in sorted(steps, key=lambda step: -len(step[0])))


_IEC_STEPS = tuple(
    (suffix, Decimal(1 << (10 * i))) for i, suffix in enumerate(("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"))
)
_DURATION_STEPS = (
    ("ns", Decimal("0.001")),
    ("us", Decimal(1)),
    ("ms", Decimal(1000)),
    ("s", Decimal(10**6)),
    ("min", Decimal(60 * 10**6)),
    ("h", Decimal(3600 * 10**6)),
    ("d", Decimal(86400 * 10**6)),
)

#: bytes, in B, KiB, MiB, ... EiB
BYTES = Scale(_IEC_STEPS, whole=True, pattern=f"[0-9]{{1,20}}(?:[.][0-9]{{1,9}})? (?:{_alternatives(_IEC_STEPS)})")
#: a duration stored in microseconds, in ns, us, ms, s, min, h, d
MICROSECONDS = Scale(
    _DURATION_STEPS,
    whole=False,
    pattern=f"[0-9]{{1,20}}(?:[.][0-9]{{1,20}})?(?:e[-+]?[0-9]{{1,3}})? (?:{_alternatives(_DURATION_STEPS)})",
)


#: how kvlog's text marks a value no line stated, that kvlog worked out (a migration's inference, a load's drop)
INFERRED_MARK = "(inferred)"
#: how a line of ``kvlog migrate --format text`` ends when some of the values it says were inferred, and
#: how the migration reads that ending back (the fields' names, bounded: parsers stay linear)
INFERRED_FIELDS_MARK = " (inferred: {fields})"
INFERRED_FIELDS_READ = re.compile(r" \(inferred: ([a-z_]{1,64}(?:, [a-z_]{1,64}){0,31})\)\Z")


def byte_figure(value: int | None, *, inferred: bool = False) -> str:
    """A byte count for people: ``unknown`` when no line stated it (never ``0 B``), marked when it was inferred."""
    if value is None:
        return "unknown"
    return f"{BYTES.format(value)} {INFERRED_MARK}" if inferred else BYTES.format(value)
