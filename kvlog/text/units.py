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
from decimal import ROUND_CEILING, ROUND_HALF_EVEN, Decimal


@dataclass(frozen=True)
class Scale:
    """Units of one dimension, smallest first, each with its size in the base unit the event stores."""

    steps: tuple[tuple[str, Decimal], ...]
    #: values are whole base units (bytes): those below the second unit are printed exactly
    whole: bool
    #: a regular expression for a printed figure, bounded (parsers must stay linear)
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
        number = Decimal(number_text)
        if not self.whole:
            return float(number * factor), 0
        value = int((number * factor).to_integral_value(ROUND_HALF_EVEN))
        decimals = max(0, -int(number.as_tuple().exponent))
        if factor == 1:
            return value, 0
        return value, int((factor / 2 / Decimal(10) ** decimals).to_integral_value(ROUND_CEILING))


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
BYTES = Scale(_IEC_STEPS, whole=True, pattern=f"-?[0-9]{{1,20}}(?:[.][0-9]{{1,9}})? (?:{_alternatives(_IEC_STEPS)})")
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
