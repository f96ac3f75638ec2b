"""Level names: the five kvlog writes, the structlog spellings of them, and the stdlib's numbers for them."""

from __future__ import annotations

import logging
from typing import Literal

LogLevel = Literal["debug", "info", "warning", "error", "critical"]

LEVELS: tuple[LogLevel, ...] = ("debug", "info", "warning", "error", "critical")
#: structlog method names that are not level names
ALIASES = {"warn": "warning", "exception": "error", "fatal": "critical", "failure": "error", "err": "error"}
#: the numbers a filtering bound logger and a stdlib logger compare
NUMBERS: dict[str, int] = {name: logging.getLevelNamesMapping()[name.upper()] for name in LEVELS}


def threshold(level: str) -> int:
    """The number of the least severe level ``configure(level=...)`` lets through."""
    return logging.getLevelNamesMapping()[level.upper()]
