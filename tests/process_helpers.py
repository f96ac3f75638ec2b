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


def catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler installed for ``signum`` (``SigCgt`` of ``/proc/<pid>/status``).

    A signal sent before the handler is in place kills with the default action: a test that means to
    exercise the handler waits for this instead of sleeping a guessed start-up time.
    """
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1]
    return bool(int(caught, 16) >> (signum - 1) & 1)


def holds_open(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open (it reads with ``pread``: the offset tells nothing)."""
    try:
        return any(Path(fd).resolve() == path.resolve() for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False  # a descriptor closed meanwhile: ask again
