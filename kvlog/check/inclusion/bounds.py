"""Bounds as (value, inclusive) pairs: the intervals of numbers and the ranges of lengths and counts.

A missing bound is ``None`` (minus or plus infinity); integer intervals are made inclusive first, so
that ``exclusiveMinimum: 0`` and ``minimum: 1`` compare equal for integers.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from kvlog.schema.readings import json_number


def number(value: Any) -> Fraction | None:
    if not json_number(value):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return Fraction(value)


def interval(schema: dict[str, Any], integral: bool) -> tuple[Any, Any]:
    """(lower, upper) as (value, inclusive) pairs or None; integer bounds made inclusive."""
    low: tuple[Fraction, bool] | None = None
    high: tuple[Fraction, bool] | None = None
    for key, inclusive in (("minimum", True), ("exclusiveMinimum", False)):
        value = number(schema.get(key))
        if value is not None and (low is None or value > low[0] or (value == low[0] and not inclusive)):
            low = (value, inclusive)
    for key, inclusive in (("maximum", True), ("exclusiveMaximum", False)):
        value = number(schema.get(key))
        if value is not None and (high is None or value < high[0] or (value == high[0] and not inclusive)):
            high = (value, inclusive)
    if integral:
        if low is not None:
            low = (Fraction(math.ceil(low[0]) if low[1] else math.floor(low[0]) + 1), True)
        if high is not None:
            high = (Fraction(math.floor(high[0]) if high[1] else math.ceil(high[0]) - 1), True)
    return low, high


def le(a: Any, b: Any, *, lower: bool) -> bool:
    """For lower bounds: reader ``a`` admits everything above writer ``b``; for upper ones the mirror."""
    if lower:
        if a is None:
            return True
        if b is None:
            return False
        return a[0] < b[0] or (a[0] == b[0] and (a[1] or not b[1]))
    if b is None:
        return True
    if a is None:
        return False
    return a[0] < b[0] or (a[0] == b[0] and (b[1] or not a[1]))


def before(high: Any, low: Any) -> bool:
    if high is None or low is None:
        return False
    return high[0] < low[0] or (high[0] == low[0] and not (high[1] and low[1]))


def integral_step(schema: dict[str, Any]) -> bool:
    step = number(schema.get("multipleOf"))
    return step is not None and step.denominator == 1


def divides(reader_step: Any, writer_step: Any, integral: bool) -> bool:
    r = number(reader_step)
    if r is None:
        return True
    w = number(writer_step)
    if w is None:
        return integral and r.numerator == 1 and r > 0
    return w % r == 0


def show_bound(bound: Any, sign: str) -> str:
    if bound is None:
        return "none"
    value, inclusive = bound
    text = str(int(value)) if value.denominator == 1 else str(float(value))
    return f"{sign}{'=' if inclusive else ''} {text}"


def show_range(low: Any, high: Any) -> str:
    """A length or count range, ``[2, 5]`` or ``[0, inf)``: whole, inclusive bounds (``show_bound`` shows numbers')."""

    def one(bound: Any, opening: bool) -> str:
        if bound is None or bound == math.inf:
            return "(-inf" if opening else "inf)"
        return f"[{bound}" if opening else f"{bound}]"

    return f"{one(low, True)}, {one(high, False)}"


def sort_key(bound: Any) -> tuple[int, Fraction, int]:
    """Orders lower bounds: -inf first, then by value, an inclusive bound before an exclusive one."""
    return (0, Fraction(0), 0) if bound is None else (1, bound[0], 0 if bound[1] else 1)


def empty_above(reached: Any, high: Any) -> bool:
    """Whether nothing lies between lower bound ``reached`` and upper bound ``high``."""
    if reached is None or high is None:
        return False
    return bool(reached[0] > high[0] or (reached[0] == high[0] and not (reached[1] and high[1])))


def point_between(reached: Any, next_low: Any, integral: bool) -> int | float:
    """A value at or just above ``reached`` and below ``next_low``: a value no span covers."""
    if reached is None:
        value = (next_low[0] - 1) if next_low is not None else Fraction(0)
    elif reached[1]:
        value = reached[0]
    elif next_low is not None and next_low[0] > reached[0]:
        value = (reached[0] + next_low[0]) / 2
    else:
        value = reached[0] + Fraction(1, 2)
    if integral or value.denominator == 1:
        return math.floor(value) if integral else int(value)
    return float(value)
