"""The pytest plugin (entry point ``kvlog``): the ``kvlog_events`` fixture.

A test that emits an event its schema rejects should fail where it runs, not months later when a
dashboard misreads a log. The fixture routes kvlog's pipeline through ``warn`` validation, so an
invalid event is replaced by a ``kvlog.schema_violation`` report instead of raising inside the
code under test (which may catch exceptions), captures every event as it leaves the processors,
and fails the test when a report was captured, listing what was wrong: the test itself fails for
events emitted while it ran, its teardown for events that other fixtures emit while tearing down.
"""

from __future__ import annotations

import io
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kvlog.emission import VIOLATION_EVENT, configure, get_config, restore
from kvlog.schema.readings import json_text
from kvlog.testing import capture_events


@dataclass
class _Capture:
    events: list[dict[str, Any]] = field(default_factory=list)
    reported: int = 0  # events before this index were judged with the test's own result


_CAPTURE = pytest.StashKey[_Capture]()


@pytest.fixture
def kvlog_events(request: pytest.FixtureRequest) -> Iterator[list[dict[str, Any]]]:
    """Every kvlog event the test emits, after all processors; invalid ones fail the test.

    The list holds events as the renderer receives them (envelope included): assert on them freely.
    kvlog's configuration is restored afterwards.
    """
    saved = get_config()
    configure(output="json", validation="warn", stream=io.BytesIO())
    capture = _Capture()
    try:
        with capture_events() as capture.events:
            request.node.stash[_CAPTURE] = capture
            yield capture.events
    finally:
        restore(saved)
    late = violations_report(capture.events[capture.reported :])
    if late is not None:
        pytest.fail(f"{late}\n(emitted after the test body, while fixtures were torn down)", pytrace=False)


def violations_report(events: list[dict[str, Any]]) -> str | None:
    """What the captured ``kvlog.schema_violation`` reports say, one line per problem; None when there are none."""
    reports = [event for event in events if event.get("event") == VIOLATION_EVENT]
    if not reports:
        return None
    lines = [f"kvlog: the test emitted {len(reports)} invalid event(s):"]
    for report in reports:
        name = f"{report.get('violating_event')}@{json_text(report.get('violating_schema_version'))}"
        lines += [f"  {name}: {error['path']}: {error['message']}" for error in report.get("errors", [])]
        if report.get("suppressed"):
            lines.append(f"  (and {report['suppressed']} more invalid events, not reported: rate limit)")
    return "\n".join(lines)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    """Turn a passing test that emitted invalid events into a failure that says which and why."""
    report = yield
    capture = item.stash.get(_CAPTURE, None)
    if call.when == "call" and capture is not None:
        capture.reported = len(capture.events)
        problem = violations_report(capture.events)
        if problem is not None and report.passed:
            report.outcome = "failed"
            report.longrepr = problem
        elif problem is not None and report.failed:
            report.sections.append(("kvlog schema violations", problem))
    return report
