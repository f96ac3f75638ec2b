"""pytest plugin of the baseline run (loaded with ``-p``): what each unmutated test covers and costs.

- switches coverage.py's context to the test's node id while the test runs (setup, call, teardown), so
  each covered line names the tests that ran it, parametrised cases and classes included;
- while a shared fixture (scope class, module, package or session) is set up, switches it to
  ``fixture:<name>@<where defined>`` instead: its value serves every test that uses it, not only the
  test that happened to set it up first;
- records each test's duration and outcome, the shared fixtures it uses, and whether it (or a shared
  fixture) started a Python subprocess or forked (``os.fork``, multiprocessing's ``fork`` context): a
  mutant must run against every such test, as coverage does not see into the child (a forked child
  that leaves by ``os._exit`` never saves what it ran);
- writes all of it as JSON to the file named by ``MUTATION_PROBE_OUT``.

Lines run outside any test and any shared fixture (plugin loading, collection) keep the empty context.
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
_contexts: list[str] = []  # what runs now: a test's node id or a shared fixture's key, innermost last
_subprocess_fixtures: set[str] = set()


def _entry(node_id: str) -> dict[str, Any]:
    return _tests.setdefault(node_id, {"duration": 0.0, "subprocess": False, "failed": False, "fixtures": []})


def _switch(context: str) -> None:
    current = coverage.Coverage.current() if coverage is not None else None
    if current is not None:
        current.switch_context(context)


def _fixture_key(fixturedef: Any) -> str:
    return f"fixture:{fixturedef.argname}@{fixturedef.baseid}"


def _mark_subprocess() -> None:
    if not _contexts:
        return
    if _contexts[-1].startswith("fixture:"):
        _subprocess_fixtures.add(_contexts[-1])
    else:
        _entry(_contexts[-1])["subprocess"] = True


_popen_init = subprocess.Popen.__init__
_process_start = multiprocessing.process.BaseProcess.start
_fork = os.fork


def _watched_popen_init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
    _mark_subprocess()
    _popen_init(self, *args, **kwargs)


def _watched_process_start(self: multiprocessing.process.BaseProcess) -> None:
    _mark_subprocess()
    _process_start(self)


def _watched_fork() -> int:
    _mark_subprocess()
    return _fork()


def pytest_configure(config: pytest.Config) -> None:
    subprocess.Popen.__init__ = _watched_popen_init  # type: ignore[method-assign]
    multiprocessing.process.BaseProcess.start = _watched_process_start  # type: ignore[method-assign]
    os.fork = _watched_fork


def _shared_fixtures(item: pytest.Item) -> list[str]:
    info = getattr(item, "_fixtureinfo", None)
    definitions = getattr(info, "name2fixturedefs", {}) or {}
    keys = []
    for name in getattr(item, "fixturenames", ()):
        chain = definitions.get(name)
        if chain and chain[-1].scope != "function":
            keys.append(_fixture_key(chain[-1]))
    return keys


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    entry = _entry(item.nodeid)
    entry["fixtures"] = _shared_fixtures(item)
    _contexts.append(item.nodeid)
    _switch(item.nodeid)
    started = time.perf_counter()
    try:
        return (yield)
    finally:
        entry["duration"] += time.perf_counter() - started
        _contexts.pop()
        _switch(_contexts[-1] if _contexts else "")


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: pytest.FixtureRequest) -> Generator[None, object, object]:
    if fixturedef.scope == "function":
        return (yield)
    key = _fixture_key(fixturedef)
    _contexts.append(key)
    _switch(key)
    try:
        return (yield)
    finally:
        _contexts.pop()
        _switch(_contexts[-1] if _contexts else "")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed:
        _entry(report.nodeid)["failed"] = True


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _collection_errors.append(report.nodeid or "(collection)")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    out = os.environ.get("MUTATION_PROBE_OUT")
    if out:
        for entry in _tests.values():
            entry["subprocess"] = entry["subprocess"] or bool(_subprocess_fixtures.intersection(entry["fixtures"]))
        result = {"tests": _tests, "collection_errors": _collection_errors, "exitstatus": int(exitstatus)}
        Path(out).write_text(json.dumps(result))
