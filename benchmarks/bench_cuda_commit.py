"""Commit and decommit cost of ``VmmArena.cuda`` against bare driver calls and torch's expandable segments.

What a user pays for truthful accounting: the arena adds bookkeeping, two ``cuMemGetInfo`` reads per
map/unmap, a context check, a ``cuCtxSynchronize`` before unmapping, and one validated JSON event per
operation (written to /dev/null here, so disk speed is not measured). Baselines, in the same process:

- ``bare``: the same driver calls the backend makes (per granule ``cuMemCreate`` + ``cuMemMap``, one
  ``cuMemSetAccess`` per operation; one ``cuMemUnmap`` per operation + ``cuMemRelease`` per granule),
  so the ratio is the arena's own overhead;
- ``bare_naive``: the textbook loop, ``cuMemCreate`` + ``cuMemMap`` + ``cuMemSetAccess`` per granule and
  ``cuMemUnmap`` + ``cuMemRelease`` per granule;
- ``arena_32mib`` against ``bare_32mib``: the same with ``CudaBackend(granularity_bytes=32 MiB)``, one
  physical handle per 32 MiB, since the driver's cost is per handle;
- ``torch_expandable``: growing and shrinking the same bytes through torch's caching allocator with
  ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (``torch.empty`` after ``empty_cache``, then
  ``del`` + ``empty_cache``), in a subprocess because the allocator reads the setting once.

Rounds interleave the variants and the median round is reported. Needs a GPU, torch and cuda-bindings:

    python benchmarks/bench_cuda_commit.py --json out.json [--profile profile.txt]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from cuda.bindings import driver

import kvlog
from kvlog import events
from kvlog.memory import VmmArena
from kvlog.memory.cuda_backend import CudaBackend

GiB = 1 << 30
COARSE_GRANULE = 32 << 20  # torch's expandable segments use 20 MiB handles; a power of two is the closer choice
SUCCESS = driver.CUresult.CUDA_SUCCESS


def ok(returned: tuple[Any, ...]) -> Any:
    assert returned[0] == SUCCESS, returned[0]
    return returned[1] if len(returned) > 1 else None


def driver_free() -> int:
    return int(ok(driver.cuMemGetInfo()))


class Bare:
    """Driver calls only: no books, no measurement, no events."""

    def __init__(self, reserve: int, naive: bool, handle_bytes: int | None = None) -> None:
        self.prop = driver.CUmemAllocationProp()
        self.prop.type = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        self.prop.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        self.prop.location.id = 0
        self.access = driver.CUmemAccessDesc()
        self.access.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        self.access.location.id = 0
        self.access.flags = driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        minimum = int(
            ok(
                driver.cuMemGetAllocationGranularity(
                    self.prop, driver.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM
                )
            )
        )
        self.g = handle_bytes or minimum
        self.base = int(ok(driver.cuMemAddressReserve(reserve, minimum, 0, 0)))
        self.reserve = reserve
        self.naive = naive
        self.handles: dict[int, Any] = {}

    def commit(self, offset: int, nbytes: int) -> None:
        g, prop, access = self.g, self.prop, [self.access]
        start = self.base + offset
        for address in range(start, start + nbytes, g):
            handle = ok(driver.cuMemCreate(g, prop, 0))
            ok(driver.cuMemMap(address, g, 0, handle, 0))
            if self.naive:
                ok(driver.cuMemSetAccess(address, g, access, 1))
            self.handles[address] = handle
        if not self.naive:
            ok(driver.cuMemSetAccess(start, nbytes, access, 1))

    def decommit(self, offset: int, nbytes: int) -> None:
        g = self.g
        start = self.base + offset
        if not self.naive:
            ok(driver.cuMemUnmap(start, nbytes))
        for address in range(start, start + nbytes, g):
            if self.naive:
                ok(driver.cuMemUnmap(address, g))
            ok(driver.cuMemRelease(self.handles.pop(address)))

    def close(self) -> None:
        ok(driver.cuMemAddressFree(self.base, self.reserve))


def per_call(function: Callable[[], object], calls: int = 2000) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - started) / calls


def timed(operations: list[tuple[Callable[[int, int], None], int, int]]) -> float:
    started = time.perf_counter()
    for operation, offset, nbytes in operations:
        operation(offset, nbytes)
    return time.perf_counter() - started


def round_of(target: Any, g: int, granules: int, gib_steps: int) -> dict[str, float]:
    """One round: ``granules`` one-granule commits then decommits; ``gib_steps`` 1 GiB commits then decommits."""
    small = [(offset * g, g) for offset in range(granules)]
    large = [(step * GiB, GiB) for step in range(gib_steps)]
    figures: dict[str, float] = {}
    for size, ranges, count in (("granule", small, granules), ("gib", large, gib_steps)):
        if count:
            figures[f"commit_{size}_s"] = timed([(target.commit, o, n) for o, n in ranges]) / count
            figures[f"decommit_{size}_s"] = timed([(target.decommit, o, n) for o, n in ranges]) / count
    return figures


TORCH_CHILD = """
import json, statistics, sys, time, torch
GiB = 1 << 30
COARSE_GRANULE = 32 << 20  # torch's expandable segments use 20 MiB handles; a power of two is the closer choice
steps, rounds = int(sys.argv[1]), int(sys.argv[2])
torch.empty(GiB, dtype=torch.uint8, device="cuda"); torch.cuda.empty_cache(); torch.cuda.synchronize()
commits, decommits = [], []
for _ in range(rounds):
    held = []
    started = time.perf_counter()
    for _ in range(steps):
        held.append(torch.empty(GiB, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    commits.append((time.perf_counter() - started) / steps)
    started = time.perf_counter()
    for _ in range(steps):
        del held[-1]
        torch.cuda.empty_cache()
    torch.cuda.synchronize()
    decommits.append((time.perf_counter() - started) / steps)
assert torch.cuda.memory_reserved() == 0, torch.cuda.memory_reserved()
print(json.dumps({"commit_gib_s": statistics.median(commits), "decommit_gib_s": statistics.median(decommits)}))
"""


def torch_expandable(gib_steps: int, rounds: int) -> dict[str, float]:
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    done = subprocess.run(
        [sys.executable, "-c", TORCH_CHILD, str(gib_steps), str(rounds)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--granules", type=int, default=512, help="one-granule commits per round")
    parser.add_argument("--gib", type=int, default=8, help="1 GiB commits per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--profile", help="write a cProfile of the arena's one-granule commits here")
    args = parser.parse_args()

    with Path(os.devnull).open("w") as sink:
        kvlog.configure(output="json", validation="warn", stream=sink)
        torch.zeros(1, device="cuda").add_(1)
        torch.cuda.synchronize()
        reserve = max(args.gib * GiB, args.granules * 2 * 1024 * 1024) * 2
        arena = VmmArena.cuda(0, reserve_bytes=reserve)
        g = arena.granularity_bytes
        coarse = COARSE_GRANULE
        # name: (target, its granule, one-granule operations per round)
        variants: dict[str, tuple[Any, int, int]] = {
            "arena": (arena, g, args.granules),
            "bare": (Bare(reserve, False), g, args.granules),
            "bare_naive": (Bare(reserve, True), g, args.granules),
            "arena_32mib": (VmmArena(CudaBackend(0, granularity_bytes=coarse), reserve), coarse, 0),
            "bare_32mib": (Bare(reserve, False, coarse), coarse, 0),
        }
        for target, granule, _ in variants.values():  # warm-up: first mappings of a reservation build page tables
            round_of(target, granule, 16, 1)
        free_before = driver_free()
        samples: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, (target, granule, granules) in variants.items():
                samples[name].append(round_of(target, granule, granules, args.gib))
                assert driver_free() == free_before, f"{name} leaked device memory"
        components = {
            "cuMemGetInfo_s": per_call(driver.cuMemGetInfo),
            "cuCtxSynchronize_s": per_call(driver.cuCtxSynchronize),
            "emit_commit_event_s": per_call(
                lambda: kvlog.emit(
                    events.KvArenaCommit(
                        arena_id="bench",
                        range_count=1,
                        offset_bytes=0,
                        nbytes=g,
                        requested_nbytes=g,
                        committed_bytes=g,
                        measured_committed_bytes=g,
                        measurement_source="cuMemGetInfo",
                        duration_us=1.0,
                    )
                )
            ),
        }
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            round_of(arena, g, args.granules, 0)
            profiler.disable()
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(30)
            Path(args.profile).write_text(text.getvalue())
        measured = arena.measure()
        for target, _, _ in variants.values():
            target.close()

    figures: dict[str, dict[str, float]] = {
        name: {key: statistics.median(sample[key] for sample in runs) for key in runs[0]}
        for name, runs in samples.items()
    }
    figures["torch_expandable"] = torch_expandable(args.gib, args.rounds)
    ratios = {
        f"{ours}/{base} {key}": figures[ours][key] / figures[base][key]
        for ours, bases in (
            ("arena", ("bare", "bare_naive", "torch_expandable")),
            ("arena_32mib", ("bare_32mib", "torch_expandable")),
        )
        for base in bases
        for key in figures[base]
    }
    report = {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "device": torch.cuda.get_device_name(0),
        "granularity_bytes": g,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "arena_measured_after_rounds": measured.nbytes if measured else None,
        "figures": figures,
        "components": components,
        "ratios": ratios,
    }
    print(f"{'variant':<18}{'commit/granule':>16}{'decommit/granule':>18}{'commit/GiB':>13}{'decommit/GiB':>15}")
    for name, values in figures.items():
        cells = [
            f"{values[key] * 1e6:14.1f}us" if key in values else f"{'-':>16}"
            for key in ("commit_granule_s", "decommit_granule_s")
        ]
        print(
            f"{name:<18}{cells[0]}{cells[1]:>18}"
            f"{values['commit_gib_s'] * 1e3:11.2f}ms{values['decommit_gib_s'] * 1e3:13.2f}ms"
        )
    for name, seconds in components.items():
        print(f"{name:<45}{seconds * 1e6:7.2f}us per call")
    for name, ratio in ratios.items():
        print(f"{name:<45}{ratio:6.3f}x")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
