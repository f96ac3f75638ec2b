"""Taps: callables that see a copy of every event as it is written (test capture, metrics, OTel)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Tap = Callable[[dict[str, Any]], None]

#: called, in order, by the last processor (``Finisher``) with what the renderer wrote
taps: list[Tap] = []


def add_tap(tap: Tap) -> None:
    """Call ``tap`` with a copy of every event as it is written, once validated and rendered.

    The tap sees what the renderer wrote: a violation report in place of an invalid event or of one
    that could not be rendered, nothing for a dropped one. Taps run before the line reaches the
    stream or the stdlib handlers, so an event whose write then fails is still seen (and counted by
    ``lost_events()``).
    """
    taps.append(tap)


def remove_tap(tap: Tap) -> None:
    """Stop calling ``tap``."""
    taps.remove(tap)
