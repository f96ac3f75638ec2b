"""Capturing events in tests as they leave the pipeline: validated, with their envelope."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kvlog.emission import add_tap, remove_tap


@contextmanager
def capture_events() -> Iterator[list[dict[str, Any]]]:
    """Collect every event emitted inside the block, exactly as the renderer receives it."""
    captured: list[dict[str, Any]] = []
    add_tap(captured.append)
    try:
        yield captured
    finally:
        remove_tap(captured.append)


__all__ = ["capture_events"]
