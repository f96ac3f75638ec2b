"""Running a command with a hard time limit: in its own session, output to a file, the whole group killed.

Output goes to a file, not a pipe, so that a grandchild which outlives the command (a server a test
started) cannot keep the tool waiting for end-of-file; on timeout the command's whole process group is
killed, and after every run whatever is left of the group too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

_running: set[int] = set()
_lock = threading.Lock()
_stopping = threading.Event()


@dataclass(frozen=True)
class Finished:
    """How a command ended: its exit status (None when it ran out of time) and the seconds it took."""

    returncode: int | None
    seconds: float


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: float, log: Path) -> Finished:
    """Run ``command`` (stdout and stderr into ``log``); never longer than ``timeout`` seconds."""
    started = time.monotonic()
    with log.open("wb") as output:
        with _lock:  # checked and registered at once: kill_all either sees this command or stops it starting
            if _stopping.is_set():
                raise KeyboardInterrupt
            process = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            _running.add(process.pid)
        try:
            returncode: int | None = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            returncode = None
        finally:
            _kill_group(process.pid)
            if process.poll() is None:
                process.wait()
            with _lock:
                _running.discard(process.pid)
    return Finished(returncode, time.monotonic() - started)


def kill_all() -> None:
    """Kill every command still running, and start no other (the tool is interrupted)."""
    with _lock:
        _stopping.set()
        groups = list(_running)
    for pid in groups:
        _kill_group(pid)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
