"""The ``kvlog_events`` fixture, run the way users run it: an inner pytest session with the installed plugin."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

INNER = """
import pytest

from kvlog.emission import emit, get_logger
from kvlog.events import KvArenaClosed


def test_valid_events(kvlog_events):
    emit(KvArenaClosed(arena_id="4242_0", released_bytes=2097152))
    get_logger().info("kv_memory.pool_end", avail_bytes=1 << 30)
    assert [e["event"] for e in kvlog_events] == ["kv_arena.closed", "kv_memory.pool_end"]
    assert kvlog_events[0]["schema_version"] == 1 and kvlog_events[0]["level"] == "info"


def test_invalid_event(kvlog_events):
    get_logger().info("kv_arena.closed", arena_id="4242_0", released_bytes=-1)


def test_invalid_event_swallowed_by_the_code_under_test(kvlog_events):
    try:
        get_logger().warning("kv_arena.closed", arena_id=7, released_bytes=4096)
    except Exception:
        pass


@pytest.fixture
def arena_closed_at_teardown():
    yield
    get_logger().info("kv_arena.closed", arena_id="4242_0", released_bytes=1.5)


def test_invalid_event_from_a_fixture_teardown(kvlog_events, arena_closed_at_teardown):
    pass


def test_without_the_fixture_nothing_changes():
    get_logger().info("kv_arena.closed", arena_id="4242_0", released_bytes=-1)
"""


def test_invalid_events_fail_the_test_and_valid_ones_pass(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "kvlog", "-q")
    result.assert_outcomes(passed=3, failed=2, errors=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*kvlog: the test emitted 1 invalid event(s):*",
            "*kv_arena.closed@1: $.released_bytes: -1 is less than the minimum of 0*",
        ]
    )
    result.stdout.fnmatch_lines(["*kv_arena.closed@1: $.arena_id: 7 is not of type 'string'*"])
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_invalid_event_from_a_fixture_teardown*",
            "*kv_arena.closed@1: $.released_bytes: 1.5 is not of type 'integer'*",
            "*(emitted after the test body, while fixtures were torn down)*",
        ]
    )
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert sorted(line.split("::")[1].split()[0] for line in failed) == [
        "test_invalid_event",
        "test_invalid_event_swallowed_by_the_code_under_test",
    ]


def test_plugin_is_registered_by_the_installed_entry_point(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner="def test_has_fixture(kvlog_events):\n    assert kvlog_events == []\n")
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=1)
