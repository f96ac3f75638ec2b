"""Finding a run's worker processes, as the OOM killer or an operator would pick one to kill."""

from __future__ import annotations

from pathlib import Path


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``, from ``/proc/*/stat``.

    Not ``/proc/<pid>/task/<tid>/children``: that file lists only what one thread started and exists only on
    kernels built with CONFIG_PROC_CHILDREN (some cloud kernels are not).
    """
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found
