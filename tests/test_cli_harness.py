"""The in-process CLI harness (``cli_harness.kvlog``) shows what a process would, and leaks nothing.

Each test here fails if the harness regresses into one that mixes standard error into standard output,
hides a traceback, or leaves a run's signal handlers, working directory or environment to the next test.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from cli_harness import kvlog, kvlog_process

from kvlog.io import stopping


def test_standard_error_is_its_own_stream_and_the_exit_status_is_kept(tmp_path: Path) -> None:
    done = kvlog("validate", "-", stdin=b"{bad\n")
    assert done.returncode == 1
    assert done.stdout.startswith(b"-:1: ")
    assert done.stderr == b"0 events, 0 invalid, 1 non-JSON lines, 0 skipped, 1 problems\n"
    usage = kvlog("nosuch")
    assert (usage.returncode, usage.stdout) == (2, b"")
    assert usage.stderr.startswith(b"Usage: kvlog [OPTIONS] COMMAND")


def test_it_shows_what_the_real_entry_point_shows(tmp_path: Path) -> None:
    """The one test of ``python -m kvlog`` itself: the same status and bytes as the harness."""
    (tmp_path / "bad.jsonl").write_bytes(b"{bad\n")
    args = ("validate", "bad.jsonl")
    real, here = kvlog_process(*args, cwd=tmp_path), kvlog(*args, cwd=tmp_path)
    assert (real.returncode, real.stdout, real.stderr) == (here.returncode, here.stdout, here.stderr)


def test_an_uncaught_exception_fails_the_test_with_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_options: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("kvlog.commands.validate", broken)
    with pytest.raises(AssertionError, match="a traceback reached the user") as caught:
        kvlog("validate", "-", stdin=b"")
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_a_run_leaves_no_process_state_behind(tmp_path: Path) -> None:
    handlers = {signum: signal.getsignal(signum) for signum in stopping.STOP_SIGNALS}
    hook, directory, environment = sys.unraisablehook, os.getcwd(), dict(os.environ)
    done = kvlog("validate", "-", stdin=b"", cwd=tmp_path, env={**os.environ, "KVLOG_HARNESS_PROBE": "1"})
    assert done.returncode == 0
    assert {signum: signal.getsignal(signum) for signum in stopping.STOP_SIGNALS} == handlers
    assert (sys.unraisablehook, os.getcwd(), dict(os.environ)) == (hook, directory, environment)
    assert not stopping._books and not stopping._swallowed


def test_env_replaces_the_environment_as_a_process_would() -> None:
    seen: dict[str, str] = {}

    def record(*_args: object, **_options: object) -> None:
        seen.update(os.environ)
        raise SystemExit(0)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("kvlog.commands.validate", record)
        kvlog("validate", "-", env={"ONLY": "this"})
    assert seen == {"ONLY": "this"}
