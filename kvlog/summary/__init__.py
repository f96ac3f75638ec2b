"""``kvlog summarize``: one table per fleet of what each server run and rank held, and what old logs overstated."""

from __future__ import annotations

from kvlog.summary.fleet import FleetSummary, RunRow, summarize_runs
from kvlog.summary.render import FORMATS, render

__all__ = ["FORMATS", "FleetSummary", "RunRow", "render", "summarize_runs"]
