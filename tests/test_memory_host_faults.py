"""The host arena under faults: every system call of the backend failing in turn, threads, close, exit.

Faults are injected at the backend's system-call boundary (its ``_libc`` handle and the smaps file),
one call at a time: the Nth ``mmap``/``mprotect``/``madvise``/``munmap`` returns the kernel's failure
value with ``ENOMEM`` in errno, the Nth open of ``/proc/self/smaps`` raises. A scripted sequence of
operations runs once per N until it completes without reaching N, and after every step the arena's
books must equal what the kernel says: the read-write mappings in /proc/self/maps are exactly the
committed runs and their Rss in /proc/self/smaps is exactly ``committed_bytes``. When everything is
closed the process has the same number of mappings as before: nothing leaked. Faults the kernel gives
for real (RLIMIT_AS, RLIMIT_DATA) are caused for real in a subprocess.
"""

from __future__ import annotations

import ctypes
import errno
import random
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
import torch
from memory_helpers import kernel_rss, validated_events

from kvlog.memory import ArenaError, VmmArena, host_backend
from kvlog.memory.host_backend import PAGE_SIZE

P = PAGE_SIZE
RESERVE = 64 * P
CALLS = ("mmap", "mprotect", "madvise", "munmap")


class FaultyLibc:
    """The real libc, except that the ``nth`` call (1-based) of ``call`` fails with ``code`` in errno."""

    def __init__(self, real: Any, call: str, nth: int, code: int = errno.ENOMEM) -> None:
        self._real = real
        self._call = call
        self._nth = nth
        self._code = code
        self.calls = 0
        self.fired = False

    def __getattr__(self, name: str) -> Callable[..., Any]:
        function = getattr(self._real, name)
        if name != self._call:
            return function  # type: ignore[no-any-return]

        def wrapped(*args: Any) -> Any:
            self.calls += 1
            if self.calls != self._nth:
                return function(*args)
            self.fired = True
            ctypes.set_errno(self._code)
            return host_backend._MAP_FAILED if name == "mmap" else -1

        return wrapped


class FaultySmaps:
    """``/proc/self/smaps`` whose ``nth`` open fails with EIO, as a read of a procfs file can."""

    def __init__(self, nth: int) -> None:
        self._real = Path("/proc/self/smaps")
        self._nth = nth
        self.calls = 0
        self.fired = False

    def open(self, *args: Any, **kwargs: Any) -> IO[bytes]:
        self.calls += 1
        if self.calls == self._nth:
            self.fired = True
            raise OSError(errno.EIO, "Input/output error", str(self._real))
        return self._real.open(*args, **kwargs)  # type: ignore[return-value]


def writable_runs(arena: VmmArena) -> list[tuple[int, int]]:
    """The read-write mappings inside the arena, as offsets, merged: what the kernel says is committed."""
    base, end = arena.base, arena.base + arena.reserved_va_bytes
    runs: list[tuple[int, int]] = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        span, perms = line.split()[:2]
        low, high = (int(part, 16) for part in span.split("-"))
        if high <= base or low >= end or not perms.startswith("rw"):
            continue
        assert base <= low and high <= end, f"a writable mapping {span} straddles the arena"
        if runs and runs[-1][1] == low - base:
            runs[-1] = (runs[-1][0], high - base)
        else:
            runs.append((low - base, high - base))
    return runs


def mapping_count() -> int:
    """Mappings of this process that are not read-write: reservations and guard pages, not the heap's.

    The allocators of Python and libc map and keep read-write memory as the test's objects grow; a
    leaked reservation always shows as a PROT_NONE range and two read-only guard pages.
    """
    return sum(1 for line in Path("/proc/self/maps").read_text().splitlines() if line.split()[1][:2] != "rw")


def assert_exact(arena: VmmArena) -> None:
    """Books, kernel mappings and kernel Rss agree (a closed arena must have nothing left at all)."""
    if arena.closed:
        return
    assert writable_runs(arena) == arena.committed_runs
    assert kernel_rss(arena.base, arena.base + arena.reserved_va_bytes) == arena.committed_bytes


def scenario(arena_box: list[VmmArena]) -> Iterator[str]:
    """Every kind of operation, each step yielded so the caller can check the books in between."""
    arena = VmmArena.host(RESERVE)
    arena_box.append(arena)
    yield "reserve"
    arena.commit(0, 8 * P)
    yield "commit"
    arena.commit_many([(16 * P, 4 * P), (32 * P, 8 * P)])
    yield "commit_many"
    arena.commit(6 * P, 14 * P)  # maps the gap between two runs only
    yield "commit over a gap"
    arena.decommit(4 * P, 2 * P)  # splits a run
    yield "decommit"
    arena.decommit(0, RESERVE)  # several runs in one call
    yield "decommit all"
    arena.commit_many([(0, 4 * P), (8 * P, 4 * P), (48 * P, 4 * P)])
    yield "commit again"
    view = arena.tensor(0, (4 * P,), torch.uint8)
    view.fill_(1)
    arena.sleep()
    yield "sleep"
    arena.wake()
    yield "wake"
    assert int(view.sum()) == 0  # woken memory is zeroed
    del view
    arena.measure()
    yield "measure"
    arena.close()
    yield "close"


def run_with_fault(inject: Any) -> tuple[bool, list[str]]:
    """Run the scenario under ``inject``; after a refused step, keep going where the arena allows."""
    box: list[VmmArena] = []
    failures: list[str] = []
    steps = scenario(box)
    while True:
        try:
            next(steps)
        except StopIteration:
            break
        except ArenaError as exc:
            failures.append(str(exc))
            break
        finally:
            if box:
                assert_exact(box[0])
    if box and not box[0].closed:
        # Clean up without faults; a fault during the scenario must not make this impossible.
        with fault_free():
            if box[0].asleep:
                box[0].wake()
            assert_exact(box[0])
            box[0].close()
    return inject.fired, failures


@contextmanager
def fault_free() -> Iterator[None]:
    saved_libc, saved_smaps = host_backend._libc, host_backend._SMAPS
    host_backend._libc, host_backend._SMAPS = REAL_LIBC, REAL_SMAPS
    try:
        yield
    finally:
        host_backend._libc, host_backend._SMAPS = saved_libc, saved_smaps


REAL_LIBC = host_backend._libc
REAL_SMAPS = host_backend._SMAPS


@pytest.mark.parametrize("call", [*CALLS, "smaps"])
def test_failing_the_nth_system_call_keeps_books_exact_and_leaks_nothing(
    call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fired = 0
    with validated_events() as captured:
        run_with_fault(
            FaultyLibc(REAL_LIBC, "mmap", 0)
        )  # once without a fault: first-use effects come before the baseline
        baseline = mapping_count()
        for nth in range(1, 200):
            if call == "smaps":
                inject: Any = FaultySmaps(nth)
                monkeypatch.setattr(host_backend, "_SMAPS", inject)
                monkeypatch.setattr(host_backend._pagemap, "scans", False)  # smaps as on a kernel before 6.7
            else:
                inject = FaultyLibc(REAL_LIBC, call, nth)
                monkeypatch.setattr(host_backend, "_libc", inject)
            hit, failures = run_with_fault(inject)
            monkeypatch.undo()
            if not hit:
                break
            fired += 1
            for message in failures:
                assert "ENOMEM" in message or "EIO" in message or "Input/output" in message, message
        else:
            pytest.fail(f"the scenario still reached call {nth} of {call}")
    assert fired >= 1, f"the scenario makes no {call} call: the sweep tested nothing"
    assert mapping_count() == baseline, "mappings leaked"
    errors = [event for event in captured if event["event"] == "kv_arena.error"]
    assert all(event["committed_bytes"] >= 0 for event in errors)


def test_a_failing_rollback_after_a_failed_populate_keeps_the_range_on_the_books(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two faults in one commit: populate fails, then the mmap that would undo the mprotect fails too.

    Both fail with ENOMEM at once for real when the process reaches ``vm.max_map_count``.
    """

    class DoubleFault(FaultyLibc):
        def __getattr__(self, name: str) -> Callable[..., Any]:
            real = getattr(REAL_LIBC, name)

            def call(*args: Any) -> Any:
                if name == "mmap" or (name == "madvise" and args[2] == host_backend.MADV_POPULATE_WRITE):
                    ctypes.set_errno(errno.ENOMEM)
                    return host_backend._MAP_FAILED if name == "mmap" else -1
                return real(*args)

            return call

    with validated_events(), VmmArena.host(RESERVE) as arena:
        arena.commit(0, 4 * P)
        monkeypatch.setattr(host_backend, "_libc", DoubleFault(REAL_LIBC, "none", 0))
        with pytest.raises(ArenaError, match="ENOMEM"):
            arena.commit(8 * P, 4 * P)
        monkeypatch.undo()
        assert writable_runs(arena) == arena.committed_runs
        assert kernel_rss(arena.base, arena.base + RESERVE) == arena.committed_bytes


def test_a_rollback_that_cannot_be_undone_at_all_stays_on_the_books_until_decommitted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Populate, the undoing mmap and the in-place fallback all fail: the range is still writable.

    The backend names it in ``still_held``; the arena keeps it committed, so a decommit once the
    faults are gone gives it back and nothing is left mapped.
    """

    class Stuck(FaultyLibc):
        def __getattr__(self, name: str) -> Callable[..., Any]:
            real = getattr(REAL_LIBC, name)

            def call(*args: Any) -> Any:
                fallback = name == "mprotect" and args[2] == host_backend.PROT_NONE
                if name == "mmap" or fallback or (name == "madvise" and args[2] == host_backend.MADV_POPULATE_WRITE):
                    ctypes.set_errno(errno.ENOMEM)
                    return host_backend._MAP_FAILED if name == "mmap" else -1
                return real(*args)

            return call

    with validated_events() as captured, VmmArena.host(RESERVE) as arena:
        monkeypatch.setattr(host_backend, "_libc", Stuck(REAL_LIBC, "none", 0))
        with pytest.raises(ArenaError, match=r"\[0, 16384\) could not be rolled back and stays committed"):
            arena.commit(0, 4 * P)
        monkeypatch.undo()
        assert arena.committed_runs == [(0, 4 * P)] == writable_runs(arena)
        assert captured[-1]["event"] == "kv_arena.error" and captured[-1]["committed_bytes"] == 4 * P
        arena.decommit(0, RESERVE)
        assert writable_runs(arena) == [] and arena.committed_bytes == 0
        assert kernel_rss(arena.base, arena.base + RESERVE) == 0


REAL_FAULTS = textwrap.dedent(
    """
    import resource, sys
    from pathlib import Path
    from kvlog.memory import ArenaError, VmmArena

    def status(key):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
        raise AssertionError(key)

    def maps():  # reservations and guard pages: anonymous, not read-write (the heap's come and go, and a
        # library imported on first use, such as the event validator's, maps its file's segments)
        return sum(1 for line in Path("/proc/self/maps").read_text().splitlines() if len(line.split()) == 5
                   and line.split()[1][:2] != "rw")

    before = maps()
    # RLIMIT_AS: the reservation's mmap fails with a real ENOMEM.
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (status("VmSize") + (64 << 20), hard))
    try:
        VmmArena.host(1 << 30)
    except ArenaError as exc:
        assert "mmap failed: ENOMEM" in str(exc), exc
    else:
        raise AssertionError("reserve beyond RLIMIT_AS succeeded")
    arena = VmmArena.host(16 << 20)  # still fits under the limit
    arena.commit(0, 8 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    # RLIMIT_DATA: every commit (mprotect to PROT_WRITE) fails for real, again and again; books stay exact.
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (status("VmData") + (1 << 20), hard))
    refused = 0
    for round in range(50):
        try:
            arena.commit(8 << 20, 8 << 20)
        except ArenaError as exc:
            assert "ENOMEM" in str(exc)
            refused += 1
        assert arena.committed_bytes == 8 << 20 == arena.measure().nbytes
        arena.decommit(0, 4 << 20)
        arena.commit(0, 4 << 20)  # what was just given back fits again
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
    assert refused == 50, refused
    arena.close()
    assert maps() == before, (maps(), before)
    print("ok", refused)
    """
)


def test_real_enomem_from_rlimit_as_and_rlimit_data_keeps_books_exact_and_leaks_no_mapping() -> None:
    done = subprocess.run([sys.executable, "-c", REAL_FAULTS], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "50"]


def test_eight_threads_commit_decommit_sleep_and_view_one_shared_arena() -> None:
    """Overlapping ranges from 8 threads, with views and tensor reads: the books equal the kernel at the end."""
    threads, rounds, granules = 8, 60, 256
    errors: list[BaseException] = []
    with validated_events() as captured, VmmArena.host(granules * P) as arena:
        start = threading.Barrier(threads)

        def work(index: int) -> None:
            rng = random.Random(index)
            start.wait()
            try:
                for _ in range(rounds):
                    offset, size = rng.randrange(granules) * P, rng.randrange(1, 32) * P
                    size = min(size, granules * P - offset)
                    action = rng.random()
                    if action < 0.45:
                        arena.commit(offset, size)
                    elif action < 0.9:
                        try:
                            arena.decommit(offset, size)
                        except ArenaError as refused:  # another thread's view is alive there: refused, as documented
                            assert "live tensor view" in str(refused)
                    else:
                        try:
                            view = arena.tensor(offset, (size,), torch.uint8)
                        except ArenaError:
                            continue  # not all committed at this moment: refused, as documented
                        view[0] = 1
                        del view
            except BaseException as exc:  # noqa: BLE001 - collected and reported by the main thread
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert not any(worker.is_alive() for worker in workers), "a thread hung"
        assert not errors, errors
        assert_exact(arena)
        books = [e for e in captured if e["event"] in ("kv_arena.commit", "kv_arena.decommit")]
        assert books[-1]["committed_bytes"] == arena.committed_bytes
        assert all(e["measured_committed_bytes"] == e["committed_bytes"] for e in books)


def test_every_operation_after_close_is_refused_and_close_is_idempotent() -> None:
    with validated_events() as captured:
        arena = VmmArena.host(RESERVE)
        arena.commit(0, 4 * P)
        arena.close()
        arena.close()
        refused: list[Callable[[], object]] = [
            lambda: arena.commit(0, P),
            lambda: arena.commit_many([(0, P), (2 * P, P)]),
            lambda: arena.decommit(0, P),
            lambda: arena.decommit(0, P, force=True),
            arena.sleep,
            arena.wake,
            arena.measure,
            lambda: arena.tensor(0, (4,), torch.uint8),
        ]
        for operation in refused:
            with pytest.raises(ArenaError, match="closed"):
                operation()
        assert arena.committed_bytes == 0 and arena.closed
        assert [e["event"] for e in captured].count("kv_arena.closed") == 1


EXIT_WITH_LIVE_ARENAS = textwrap.dedent(
    """
    import os, sys, threading, torch
    from kvlog.emission import configure
    from kvlog.memory import VmmArena
    configure(output="json", validation="{validation}")
    arenas = [VmmArena.host(1 << 30) for _ in range(4)]
    for arena in arenas:
        arena.commit(0, 4 << 20)
    views = [arena.tensor(0, (1 << 20,), torch.float32) for arena in arenas]
    views[0].fill_(1.0)
    arenas[1].sleep()
    threading.Thread(target=lambda: arenas[2].commit(8 << 20, 1 << 20), daemon=True).start()
    how = "{how}"
    if how == "os._exit":
        os._exit(0)
    if how == "exception":
        raise RuntimeError("the caller crashed")
    """
)


@pytest.mark.parametrize("how", ["return", "os._exit", "exception"])
def test_process_exit_with_live_arenas_views_and_a_sleeping_arena_neither_crashes_nor_hangs(how: str) -> None:
    code = EXIT_WITH_LIVE_ARENAS.format(how=how, validation="raise")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert "Fatal Python error" not in done.stderr and "Segmentation" not in done.stderr
    if how == "exception":  # the daemon thread's event may come after the traceback: no order is promised
        assert done.returncode == 1 and "RuntimeError: the caller crashed\n" in done.stderr
        assert done.stderr.count("Traceback") == 1, done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count('"kv_arena.ready"') == 4
