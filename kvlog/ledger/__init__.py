"""``kvlog ledger``: per server run and rank, where the device's memory went, and what no line accounts for."""

from __future__ import annotations

from kvlog.ledger.flags import DEFAULT_UNACCOUNTED_THRESHOLD, flagged
from kvlog.ledger.rows import CONSUMERS, Figure, LedgerRow, ledger_rows
from kvlog.ledger.tables import FORMATS, render

__all__ = [
    "CONSUMERS",
    "DEFAULT_UNACCOUNTED_THRESHOLD",
    "FORMATS",
    "Figure",
    "LedgerRow",
    "flagged",
    "ledger_rows",
    "render",
]
