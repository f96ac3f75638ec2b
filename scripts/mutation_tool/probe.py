"""pytest plugin of the baseline run (loaded with ``-p``): what each unmutated test covers and costs.

- switches coverage.py's context to the test's node id while the test runs (setup, call, teardown), so
  each covered line names the tests that ran it, parametrised cases and classes included;
- records each test's duration and outcome, and whether it started a Python subprocess (a mutant must be
  run against every such test, as coverage does not see into the child);
- writes all of it as JSON to the file named by ``MUTATION_PROBE_OUT``.
"""

from __future__ import annotations

import json
import multiprocessing.process
import os
import subprocess
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

try:
    import coverage
except ImportError:  # pragma: no cover - the baseline always runs under coverage
    coverage = None  # type: ignore[assignment]

_tests: dict[str, dict[str, Any]] = {}
_collection_errors: list[str] = []
_current: list[str] = []


def _mark_subprocess() -> None:
    if _current:
        _tests[_current[-1]]["subprocess"] = True


_popen_init = subprocess.Popen.__init__
_process_start = multiprocessing.process.BaseProcess.start


def _watched_popen_init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
    _mark_subprocess()
    _popen_init(self, *args, **kwargs)


def _watched_process_start(self: multiprocessing.process.BaseProcess) -> None:
    _mark_subprocess()
    _process_start(self)


def pytest_configure(config: pytest.Config) -> None:
    subprocess.Popen.__init__ = _watched_popen_init  # type: ignore[method-assign]
    multiprocessing.process.BaseProcess.start = _watched_process_start  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    entry = _tests.setdefault(item.nodeid, {"duration": 0.0, "subprocess": False, "failed": False})
    current = coverage.Coverage.current() if coverage is not None else None
    if current is not None:
        current.switch_context(item.nodeid)
    _current.append(item.nodeid)
    started = time.perf_counter()
    try:
        return (yield)
    finally:
        entry["duration"] += time.perf_counter() - started
        _current.pop()
        if current is not None:
            current.switch_context("")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        _tests.setdefault(report.nodeid, {"duration": 0.0, "subprocess": False, "failed": False})["failed"] = True


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _collection_errors.append(report.nodeid or "(collection)")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    out = os.environ.get("MUTATION_PROBE_OUT")
    if out:
        result = {"tests": _tests, "collection_errors": _collection_errors, "exitstatus": int(exitstatus)}
        Path(out).write_text(json.dumps(result))
