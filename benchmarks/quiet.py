"""Waiting for an idle machine before a timed run, on shared machines where other jobs come and go.

A run that overlaps another job's burst measures the other job. Each timed run starts once no
other process is runnable (Linux ``/proc/stat``'s ``procs_running``, which counts this one); the
scripts take the best of several runs, so a burst that starts mid-run costs one sample, not the figure.
"""

from __future__ import annotations

import time
from pathlib import Path

_STAT = Path("/proc/stat")


def runnable() -> int | None:
    """Processes running or ready to run right now (this one included); None where unknown."""
    try:
        for line in _STAT.read_text().splitlines():
            if line.startswith("procs_running "):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def wait_for_idle(timeout_s: float = 10.0, poll_s: float = 0.02) -> bool:
    """Block until this is the only runnable process, or ``timeout_s`` passes; True if it became idle."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        count = runnable()
        if count is None or count <= 1:
            return True
        time.sleep(poll_s)
    return False
