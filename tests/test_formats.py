"""Every memory format sglang and vLLM released has a decision, and its lines come out as decided.

The formats are harvested from every release (``formats/<server>.json``, ``scripts/harvest_formats.py``)
and held to the rules of ``formats/<server>.decisions.toml``. Sample lines are written from each harvested
format string, with the prefix of the era it was printed in, and run through the real migrator:
an ``event`` format becomes that event with every printed figure as exact bytes, a ``known`` one is
recognised and makes no event, and no line of either is reported as unread.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kvlog.migration import load_chain
from kvlog.migration.engine import MigrateOptions, Migrator

ROOT = Path(__file__).resolve().parent.parent


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("format_decisions", ROOT / "scripts" / "format_decisions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["format_decisions"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


TOOL = _load_tool()
RULES = TOOL.load_rules()
#: usage lines are events only when asked: every event format is read here, the usage lines' too
MIGRATOR = Migrator(load_chain(), MigrateOptions(usage="all"))
RELEASES = {
    server: json.loads((ROOT / "formats" / f"{server}.json").read_text())["releases"] for server in TOOL.SERVERS
}
DECIDED = [(fmt, TOOL.decide(fmt, RULES)) for server in TOOL.SERVERS for fmt in TOOL.load_formats(server)]


def _migrate(line: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
    out, dead = io.BytesIO(), []
    report = MIGRATOR.migrate("sample.log", io.BytesIO((line + "\n").encode()), out, dead.append)
    events = [json.loads(raw) for raw in out.getvalue().splitlines() if raw.startswith(b'{"event"')]
    return events, dead, dict(report.companions)


def test_every_harvested_format_has_a_decision() -> None:
    undecided = [f"{fmt.id} ({fmt.first}..{fmt.last}): {fmt.text[:100]}" for fmt, rule in DECIDED if rule is None]
    assert undecided == [], "add a rule to formats/<server>.decisions.toml:\n" + "\n".join(undecided)


def test_the_generated_files_are_current() -> None:
    """FORMATS.md and the known.toml files are written from the harvest and the decisions, never by hand."""
    stale = [str(path.relative_to(ROOT)) for path, text in TOOL.generated().items() if path.read_text() != text]
    assert stale == [], "run: .venv/bin/python scripts/format_decisions.py --write"


EVENTS = [(fmt, rule) for fmt, rule in DECIDED if rule is not None and rule.kind == "event"]
KNOWN = [(fmt, rule) for fmt, rule in DECIDED if rule is not None and rule.kind == "known"]


@pytest.mark.parametrize(("fmt", "rule"), EVENTS, ids=[fmt.id for fmt, _ in EVENTS])
def test_an_event_format_becomes_its_event_with_every_figure_exact(fmt: Any, rule: Any) -> None:
    samples = TOOL.samples(fmt, rule, RELEASES[fmt.server])
    assert len(samples) >= 2
    for sample in samples:
        events, dead, _ = _migrate(sample.line)
        assert dead == [], f"{sample.line!r} was not read: {dead[0]['reason']}"
        assert [e["event"] for e in events] == [rule.value], sample.line
        event = events[0]
        figures = {value for name, value in event.items() if name.endswith("_bytes") and isinstance(value, int)}
        uncertainty = event.get("migrated", {}).get("uncertainty_bytes", {})
        for expected in sample.expected_bytes():
            assert expected in figures, f"{sample.line!r}: {expected} bytes not in {sorted(figures)}"
        assert all(spread > 0 for spread in uncertainty.values())


@pytest.mark.parametrize(("fmt", "rule"), KNOWN, ids=[fmt.id for fmt, _ in KNOWN])
def test_a_known_format_is_recognised_and_makes_no_event(fmt: Any, rule: Any) -> None:
    for sample in TOOL.samples(fmt, rule, RELEASES[fmt.server]):
        events, dead, companions = _migrate(sample.line)
        assert (events, dead) == ([], []), sample.line
        assert sum(companions.values()) == 1, f"{sample.line!r} passed unrecognised"
