"""Commit and decommit cost of ``VmmArena.host`` against the bare system calls it is built on.

What a user pays for truthful accounting on the host backend: per operation, the arena's books
(runs, alignment, view checks, a lock), one measurement of the reservation's Rss (a ``PAGEMAP_SCAN``
ioctl, or ``/proc/self/smaps`` before Linux 6.7), and one validated JSON event (written to
/dev/null, so disk speed is not measured). Variants, same process, same reservation size,
interleaved rounds (rotating which variant goes first), median reported:

- ``bare``: the system calls alone through ctypes: ``mprotect(RW)`` + ``madvise(MADV_POPULATE_WRITE)``
  to commit, ``mmap(PROT_NONE|MAP_NORESERVE|MAP_FIXED)`` to decommit (the baseline of the ratios);
- ``backend``: ``HostBackend.map``/``unmap``: the same calls behind kvlog's error handling;
- ``arena``: ``VmmArena.commit``/``decommit``: everything, events and measurement included;
- ``arena_smaps``: the same, measuring by reading smaps as before Linux 6.7 (and before kvlog used the scan);
- ``unmeasured``: the same arena with a backend that measures nothing: what the books and the event cost;
- ``arena_batch``: the same arena, all of a round's ranges in one ``commit_many`` and one
  ``decommit_many`` (a pool's commit, a sleep): the same system calls per range, one measurement
  and one event for the batch; its times are per range.

Time per granule is the operation's time divided by its number of 4 KiB pages; GiB/s is bytes
committed (populated: really held) per second. Usage:

    .venv/bin/python benchmarks/bench_host_commit.py [--rounds 5] [--json out.json] [--per-op-median]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from kvlog.emission import configure
from kvlog.memory import HostBackend, VmmArena, host_backend
from kvlog.memory.backend import Measurement
from kvlog.memory.host_backend import (
    MADV_POPULATE_WRITE,
    MAP_ANONYMOUS,
    MAP_FIXED,
    MAP_NORESERVE,
    MAP_PRIVATE,
    PAGE_SIZE,
    PROT_NONE,
    PROT_READ,
    PROT_WRITE,
)

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
#: (operation size, operations per round): small sizes need many operations to be timed at all
SIZES = [(4 * KIB, 400), (2 * MIB, 100), (64 * MIB, 8), (GIB, 1)]

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

Op = Callable[[int, int], None]


def bare_commit(address: int, nbytes: int) -> None:
    if libc.mprotect(address, nbytes, PROT_READ | PROT_WRITE) or libc.madvise(address, nbytes, MADV_POPULATE_WRITE):
        raise OSError(ctypes.get_errno(), "bare commit failed")


def bare_decommit(address: int, nbytes: int) -> None:
    flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED
    if libc.mmap(address, nbytes, PROT_NONE, flags, -1, 0) != address:
        raise OSError(ctypes.get_errno(), "bare decommit failed")


class UnmeasuredBackend(HostBackend):
    """The host backend without its measurement: the floor of what the arena itself costs."""

    def measure(self, base: int, nbytes: int) -> Measurement | None:
        return None


class SmapsBackend(HostBackend):
    """The host backend measuring through smaps, as on a kernel without ``PAGEMAP_SCAN``."""

    def measure(self, base: int, nbytes: int) -> Measurement | None:
        return host_backend.smaps_rss(base, base + nbytes)


#: how a round's operations are summed up: their mean (the default), or their median (``--per-op-median``)
ROUND_STATISTIC: Callable[[list[float]], float] = statistics.fmean


def timed(commit: Op, decommit: Op, base: int, nbytes: int, count: int) -> tuple[float, float]:
    """Seconds per commit and per decommit over ``count`` distinct ranges starting at ``base``."""
    commits: list[float] = []
    decommits: list[float] = []
    for index in range(count):
        address = base + index * nbytes
        started = time.perf_counter()
        commit(address, nbytes)
        middle = time.perf_counter()
        decommit(address, nbytes)
        commits.append(middle - started)
        decommits.append(time.perf_counter() - middle)
    return ROUND_STATISTIC(commits), ROUND_STATISTIC(decommits)


def pair_timer(commit: Op, decommit: Op, base: int) -> Callable[[int, int], tuple[float, float]]:
    """``timed`` for one variant: seconds per commit and decommit, given the size and count of a round."""
    return lambda nbytes, count: timed(commit, decommit, base, nbytes, count)


def timed_batch(arena: VmmArena, nbytes: int, count: int) -> tuple[float, float]:
    """Seconds per range of one ``commit_many`` and one ``decommit_many`` of ``count`` adjacent ranges."""
    ranges = [(index * nbytes, nbytes) for index in range(count)]
    started = time.perf_counter()
    arena.commit_many(ranges)
    middle = time.perf_counter()
    arena.decommit_many(ranges)
    return (middle - started) / count, (time.perf_counter() - middle) / count


def run(rounds: int) -> dict[str, dict[str, dict[str, float]]]:
    """Median seconds per commit and decommit, by operation size and variant."""
    reserve = max(size * count for size, count in SIZES)
    arenas = {
        "arena": VmmArena.host(reserve),
        "arena_smaps": VmmArena(SmapsBackend(), reserve),
        "unmeasured": VmmArena(UnmeasuredBackend(), reserve),
    }
    backend = arenas["arena"].backend  # the backend refuses addresses outside its own reservations
    base = arenas["arena"].base
    pairs: dict[str, tuple[Op, Op]] = {
        "bare": (bare_commit, bare_decommit),
        "backend": (backend.map, backend.unmap),
        **{name: arena_ops(arena, base) for name, arena in arenas.items()},
    }
    variants = {name: pair_timer(commit, decommit, base) for name, (commit, decommit) in pairs.items()}
    variants["arena_batch"] = lambda size, count: timed_batch(arenas["arena"], size, count)
    results: dict[str, dict[str, dict[str, float]]] = {}
    for size, count in SIZES:
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        names = list(variants)
        for round_ in range(rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:  # rotate who goes first
                samples[name].append(variants[name](size, count))
        results[str(size)] = {
            name: {
                "commit_s": statistics.median(c for c, _ in rounds),
                "decommit_s": statistics.median(d for _, d in rounds),
            }
            for name, rounds in samples.items()
        }
    for arena in arenas.values():
        arena.close()
    return results


def arena_ops(arena: VmmArena, base: int) -> tuple[Op, Op]:
    """Commit and decommit of ``arena`` at the offsets that the other variants use from ``base``."""
    return (
        lambda address, nbytes: arena.commit(address - base, nbytes),
        lambda address, nbytes: arena.decommit(address - base, nbytes),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument(
        "--per-op-median",
        action="store_true",
        help="sum a round up by the median of its operations, not their mean: on a loaded machine a few "
        "operations that lost the CPU otherwise decide the figure (batches are one operation per round)",
    )
    args = parser.parse_args()
    global ROUND_STATISTIC  # noqa: PLW0603 - the benchmark's one setting, read by timed()
    ROUND_STATISTIC = statistics.median if args.per_op_median else statistics.fmean

    with Path(os.devnull).open("wb") as sink:
        configure(output="json", validation="warn", stream=sink)
        results = run(args.rounds)

    print(f"# {platform.node()} {platform.machine()} {os.cpu_count()} CPUs, kernel {platform.release()}")
    each = "median" if args.per_op_median else "mean"
    print(f"# page {PAGE_SIZE} B, {args.rounds} rounds, median of each round's {each}; ratios are against 'bare'")
    header = f"{'size':>9} {'variant':<12}{'commit':>11}{'/granule':>10}{'GiB/s':>8}{'ratio':>8}"
    print(header + f"{'decommit':>11}{'/granule':>10}{'GiB/s':>8}{'ratio':>8}")
    for size, by_variant in results.items():
        pages = int(size) // PAGE_SIZE
        bare = by_variant["bare"]
        for name, figures in by_variant.items():
            cells = ""
            for key in ("commit_s", "decommit_s"):
                seconds = figures[key]
                cells += f"{seconds * 1e6:9.1f}us{seconds * 1e6 / pages:8.3f}us{int(size) / GIB / seconds:8.2f}"
                cells += f"{seconds / bare[key]:7.2f}x"
            print(f"{_size(int(size)):>9} {name:<12}{cells}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if nbytes >= scale:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


if __name__ == "__main__":
    main()
