"""``kvlog check``: the rules CI runs over an event catalog, its migrations and golden logs.

``compare(old, new, mode, draft)`` is the schema-compatibility verdict the rules use, for any draft.
Each rule has a stable id (``kvlog.check.findings.RULES``); ``run_check`` applies the applicable
ones and returns a ``CheckReport`` that ``kvlog.check.rendering`` renders as text, GitHub annotations,
JUnit XML or JSON.
"""

from __future__ import annotations

from kvlog.check.driver import CheckOptions, CheckReport, run_check
from kvlog.check.findings import RULES, Finding
from kvlog.check.inclusion import Reason
from kvlog.check.verdict import Verdict, compare
from kvlog.schema.walk import Draft

__all__ = ["RULES", "CheckOptions", "CheckReport", "Draft", "Finding", "Reason", "Verdict", "compare", "run_check"]
