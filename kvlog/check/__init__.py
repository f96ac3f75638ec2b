"""``kvlog check``: the rules CI runs over an event catalog, its migrations and golden logs.

Each rule has a stable id (``kvlog.check.findings.RULES``); ``run_check`` applies the applicable
ones and returns a ``CheckReport`` that ``kvlog.check.report`` renders as text, GitHub annotations,
JUnit XML or JSON.
"""

from __future__ import annotations

from kvlog.check.findings import RULES, Finding
from kvlog.check.runner import CheckOptions, CheckReport, run_check

__all__ = ["RULES", "CheckOptions", "CheckReport", "Finding", "run_check"]
