"""The host backend's measurement against the kernel's smaps, read independently, in the states a user makes.

``measure`` reads Rss with one ``PAGEMAP_SCAN`` ioctl where the kernel has it (Linux 6.7) and with
``/proc/self/smaps`` where it does not; both must give the figure smaps gives for the reservation.
"""

from __future__ import annotations

import ctypes
import errno
import json
import mmap
import os
import platform
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from mmap import MADV_DONTNEED, MADV_HUGEPAGE
from pathlib import Path

import pytest
import torch
from memory_helpers import FailingLibc, kernel_rss, last, validated_events

from kvlog.memory import HostBackend, VmmArena, host_backend
from kvlog.memory.backend import Measurement
from kvlog.memory.host_backend import PAGE_SIZE, pagemap_rss, smaps_rss

MIB = 1 << 20


def kernel_has_pagemap_scan() -> bool:
    major, minor = (int(part) for part in platform.release().split(".")[:2])
    return (major, minor) >= (6, 7)


@pytest.fixture
def scanning() -> None:
    """Skip where the kernel predates ``PAGEMAP_SCAN``; there ``measure`` reads smaps, tested below."""
    if not kernel_has_pagemap_scan():
        pytest.skip(f"PAGEMAP_SCAN needs Linux 6.7, this is {platform.release()}")


def all_three(arena: VmmArena) -> tuple[int, int, int | None]:
    """Rss of the reservation by the scan, by kvlog's smaps reader, and by the tests' own smaps parse."""
    start, end = arena.base, arena.base + arena.reserved_va_bytes
    by_smaps = smaps_rss(start, end)
    return pagemap_rss(start, end).nbytes, kernel_rss(start, end), by_smaps.nbytes if by_smaps else None


@pytest.fixture
def fresh_pagemap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A ``_Pagemap`` that opens its file anew for one test, and closes it after."""
    pagemap = host_backend._Pagemap()
    monkeypatch.setattr(host_backend, "_pagemap", pagemap)
    yield
    if pagemap._fd >= 0:
        os.close(pagemap._fd)


@pytest.mark.usefixtures("scanning")
def test_the_scan_counts_what_smaps_counts_through_commits_decommits_and_zero_pages() -> None:
    with validated_events(), VmmArena.host(256 * MIB) as arena:
        states = [all_three(arena)]
        arena.commit(0, PAGE_SIZE)
        states.append(all_three(arena))
        arena.commit_many([(3 * PAGE_SIZE, 5 * PAGE_SIZE), (10 * MIB + 1, 7 * MIB), (256 * MIB - PAGE_SIZE, 1)])
        states.append(all_three(arena))
        arena.decommit(12 * MIB, 2 * MIB + PAGE_SIZE)
        states.append(all_three(arena))
        for index in range(0, 64, 2):  # 32 separate runs: more than one ioctl's worth of regions
            arena.commit(64 * MIB + index * PAGE_SIZE, PAGE_SIZE)
        states.append(all_three(arena))

        # A page given back behind the arena's back and then read maps the shared zero page:
        # smaps does not count it, and neither may the scan (mincore would).
        zeroed = arena.base + 10 * MIB
        assert ctypes.CDLL(None).madvise(ctypes.c_void_p(zeroed), ctypes.c_size_t(PAGE_SIZE), MADV_DONTNEED) == 0
        view = arena.tensor(10 * MIB, (PAGE_SIZE,), torch.uint8)
        assert int(view.sum()) == 0  # read, not written
        del view
        states.append(all_three(arena))

        page = PAGE_SIZE
        expected = [0, page, 8 * page + 7 * MIB, 7 * page + 5 * MIB, 39 * page + 5 * MIB, 38 * page + 5 * MIB]
        assert states == [(rss, rss, rss) for rss in expected]
        assert arena.measure() == host_backend.Measurement(expected[-1], "smaps_rss")


@pytest.mark.usefixtures("scanning")
def test_the_scan_counts_huge_pages_as_smaps_does() -> None:
    with validated_events(), VmmArena.host(64 * MIB) as arena:
        assert ctypes.CDLL(None).madvise(ctypes.c_void_p(arena.base), ctypes.c_size_t(64 * MIB), MADV_HUGEPAGE) == 0
        aligned = -arena.base % (2 * MIB)  # huge pages need 2 MiB-aligned addresses
        arena.commit(aligned, 8 * MIB + PAGE_SIZE)
        arena.decommit(aligned + 2 * MIB, 2 * MIB)
        if not anon_huge_pages(arena):
            pytest.skip("no transparent huge pages here (/sys/kernel/mm/transparent_hugepage/enabled)")
        assert all_three(arena) == (6 * MIB + PAGE_SIZE,) * 3


def anon_huge_pages(arena: VmmArena) -> int:
    """AnonHugePages of the mappings inside the arena, from smaps."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(" ", 1)[0]
        if "-" in head and ":" not in head:
            low = int(head.split("-")[0], 16)
            inside = arena.base <= low < arena.base + arena.reserved_va_bytes
        elif inside and line.startswith("AnonHugePages:"):
            total += int(line.split()[1]) * 1024
    return total


@pytest.mark.usefixtures("fresh_pagemap")
def test_a_kernel_without_pagemap_scan_is_measured_through_smaps(monkeypatch: pytest.MonkeyPatch) -> None:
    """A procfs file without an ioctl gives the real ENOTTY that pagemap gives before Linux 6.7."""
    monkeypatch.setattr(host_backend, "_PAGEMAP", Path("/proc/self/status"))
    with validated_events() as captured, VmmArena.host(64 * MIB) as arena:
        arena.commit(MIB, 3 * MIB)
        assert host_backend._pagemap.scans is False
        assert kernel_rss(arena.base, arena.base + arena.reserved_va_bytes) == 3 * MIB
        assert arena.measure() == host_backend.Measurement(3 * MIB, "smaps_rss")
        event = last(captured, "kv_arena.commit")
        assert (event["measured_committed_bytes"], event["measurement_source"]) == (3 * MIB, "smaps_rss")


@pytest.mark.usefixtures("fresh_pagemap")
def test_a_failed_scan_leaves_one_commit_unmeasured_not_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """EIO (or any error but a missing ioctl) fails that measurement: null in the event, scanning goes on."""
    real_ioctl, failures = host_backend._ioctl, iter([True])

    def failing_once(*args: object) -> int:
        if next(failures, False):
            ctypes.set_errno(errno.EIO)
            return -1
        return int(real_ioctl(*args))

    monkeypatch.setattr(host_backend, "_ioctl", failing_once)
    with validated_events() as captured, VmmArena.host(64 * MIB) as arena:
        arena.commit(0, 2 * MIB)
        event = last(captured, "kv_arena.commit")
        assert (event["committed_bytes"], event["measured_committed_bytes"]) == (2 * MIB, None)
        assert event.get("measurement_source") is None
        arena.commit(0, 4 * MIB)
        assert last(captured, "kv_arena.commit")["measured_committed_bytes"] == 4 * MIB
        assert host_backend._pagemap.scans is True


@pytest.mark.usefixtures("scanning")
def test_a_forked_child_measures_its_own_memory_not_its_parents() -> None:
    """/proc/self/pagemap opened before the fork names the parent; the child must open its own."""
    with validated_events(), VmmArena.host(64 * MIB) as arena:
        arena.commit(0, 8 * MIB)
        assert arena.measure() == host_backend.Measurement(8 * MIB, "smaps_rss")  # the parent's descriptor is open
        read_end, write_end = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child, which reports through the pipe
            try:
                inherited = host_backend._pagemap._fd
                arena.decommit(0, 8 * MIB)
                arena.commit(32 * MIB, MIB)
                measured = arena.measure()
                used = host_backend._pagemap._fd
                ours = os.readlink(f"/proc/self/fd/{used}") == f"/proc/{os.getpid()}/pagemap"
                closed = used == inherited or not os.path.exists(f"/proc/self/fd/{inherited}")
                os.write(write_end, f"{measured.nbytes if measured else -1} {ours and closed}".encode())
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            reported = pipe.read()
        os.waitpid(child, 0)
        assert reported == f"{MIB} True"  # the child's own memory, through its own descriptor, the parent's closed
        assert arena.measure() == host_backend.Measurement(8 * MIB, "smaps_rss")


def whole_reservation_rss(arena: VmmArena) -> int:
    return kernel_rss(arena.base, arena.base + arena.reserved_va_bytes)


@pytest.mark.usefixtures("scanning")
def test_every_event_measures_what_smaps_says_the_whole_reservation_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan walks only where pages can be; that must never differ from the whole reservation's Rss.

    Pages where the books say none: a decommit whose replacing ``mmap`` fails gives its range back in
    place, and memory written behind the arena's back inside a committed range stays counted.
    """
    libc = FailingLibc()
    monkeypatch.setattr(host_backend, "_libc", libc)
    end = 256 * MIB - PAGE_SIZE
    with validated_events() as captured, VmmArena.host(256 * MIB) as arena:
        measured: list[tuple[int, int]] = []

        def check(name: str) -> None:
            measured.append((last(captured, name)["measured_committed_bytes"], whole_reservation_rss(arena)))

        arena.commit(end, PAGE_SIZE)
        check("kv_arena.commit")
        arena.commit_many([(0, PAGE_SIZE), (100 * MIB, 3 * MIB)])
        check("kv_arena.commit")
        arena.decommit(end, PAGE_SIZE)
        check("kv_arena.decommit")
        libc.fail("mmap", errno.ENOMEM)  # given back in place: mprotect(PROT_NONE) + MADV_DONTNEED
        arena.decommit(101 * MIB, MIB)
        libc.failing.clear()
        check("kv_arena.decommit")
        arena.commit(101 * MIB, PAGE_SIZE)
        check("kv_arena.commit")
        arena.decommit(0, PAGE_SIZE)
        check("kv_arena.decommit")
        assert [kernel for _, kernel in measured] == [
            PAGE_SIZE,
            2 * PAGE_SIZE + 3 * MIB,
            PAGE_SIZE + 3 * MIB,
            PAGE_SIZE + 2 * MIB,
            2 * PAGE_SIZE + 2 * MIB,
            PAGE_SIZE + 2 * MIB,
        ]
        assert all(event == kernel for event, kernel in measured), measured
        assert arena.measure() == host_backend.Measurement(whole_reservation_rss(arena), "smaps_rss")


class NoOpReplacement:
    """A libc whose ``mmap(MAP_FIXED)`` says it replaced the range and did nothing: pages stay behind."""

    def __init__(self) -> None:
        self._real = host_backend._libc

    def __getattr__(self, name: str) -> object:
        function = getattr(self._real, name)
        if name != "mmap":
            return function
        return lambda address, nbytes, prot, flags, fd, offset: (
            address if flags & host_backend.MAP_FIXED else function(address, nbytes, prot, flags, fd, offset)
        )


@pytest.mark.usefixtures("scanning")
def test_a_decommit_asks_the_kernel_about_the_range_it_gave_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its event is the kernel's word on that range, not the books': pages left there are counted."""
    with validated_events() as captured, VmmArena.host(64 * MIB) as arena:
        arena.commit(8 * MIB, 2 * MIB)
        monkeypatch.setattr(host_backend, "_libc", NoOpReplacement())
        arena.decommit(9 * MIB, MIB)
        event = last(captured, "kv_arena.decommit")
        assert (event["committed_bytes"], event["measured_committed_bytes"]) == (MIB, 2 * MIB)
        assert whole_reservation_rss(arena) == 2 * MIB
        monkeypatch.undo()
        arena.commit(9 * MIB, MIB)  # the books catch up with the kernel, so that close() gives the range back


@pytest.mark.usefixtures("scanning")
def test_a_batch_decommit_asks_the_kernel_about_every_range_it_gave_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """One event for several ranges given back: the kernel's word covers each of them, not the first alone."""
    ranges = [(8 * MIB, MIB), (40 * MIB, MIB)]
    with validated_events() as captured, VmmArena.host(64 * MIB) as arena:
        arena.commit_many(ranges)
        monkeypatch.setattr(host_backend, "_libc", NoOpReplacement())
        arena.decommit_many(ranges)
        event = last(captured, "kv_arena.decommit")
        assert (event["committed_bytes"], event["measured_committed_bytes"]) == (0, 2 * MIB)
        assert whole_reservation_rss(arena) == 2 * MIB
        monkeypatch.undo()
        arena.commit_many(ranges)  # the books catch up with the kernel, so that close() gives the ranges back


@pytest.mark.usefixtures("scanning")
def test_a_range_outside_every_reservation_is_measured_whole() -> None:
    """``measure`` is the kernel's count for any range it is given, not only for its own reservations."""
    backend = HostBackend()
    base = backend.reserve(4 * PAGE_SIZE)
    elsewhere = mmap.mmap(-1, 8 * PAGE_SIZE)
    try:
        elsewhere.write(b"x" * (8 * PAGE_SIZE))  # every page resident
        window = (ctypes.c_char * (8 * PAGE_SIZE)).from_buffer(elsewhere)
        address = ctypes.addressof(window)
        del window
        assert backend.measure(address, 8 * PAGE_SIZE) == Measurement(8 * PAGE_SIZE, "smaps_rss")
        assert backend.measure(address + 2 * PAGE_SIZE, 3 * PAGE_SIZE) == Measurement(3 * PAGE_SIZE, "smaps_rss")
    finally:
        elsewhere.close()
        backend.release(base, 4 * PAGE_SIZE)


@pytest.mark.usefixtures("scanning")
def test_measuring_part_of_a_reservation_leaves_the_next_whole_measurement_its_walk_over_what_was_given_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ranges given back are walked at the reservation's next *whole* measurement, whatever comes first.

    A part measured in between, from the base or up to the end, does not reach them and must not
    cancel that walk: the whole reservation's figure is then still the kernel's, pages left behind
    by a replacement that did nothing included.
    """
    backend = HostBackend()
    size = 64 * MIB
    base = backend.reserve(size)
    try:
        backend.map(base + 8 * MIB, 2 * MIB)
        monkeypatch.setattr(host_backend, "_libc", NoOpReplacement())
        backend.unmap(base + 9 * MIB, MIB)  # says it gave the range back; its pages stay
        monkeypatch.undo()
        for start, end in ((base, base + 4 * MIB), (base + 32 * MIB, base + size)):
            assert backend.measure(start, end - start) == Measurement(kernel_rss(start, end), "smaps_rss")
        assert kernel_rss(base, base + size) == 2 * MIB
        assert backend.measure(base, size) == Measurement(2 * MIB, "smaps_rss")
    finally:
        backend.release(base, size)


def test_smaps_read_to_its_end_says_a_range_past_every_mapping_holds_nothing() -> None:
    """No mapping starts at or past the range's end, so the reader reads the whole file, and finds none in it."""
    top = max(
        int(line.split("-", 1)[1].split(" ", 1)[0], 16) for line in Path("/proc/self/maps").read_text().splitlines()
    )
    assert smaps_rss(top, top + PAGE_SIZE) == Measurement(0, "smaps_rss")


@pytest.mark.usefixtures("scanning")
def test_arenas_measured_from_several_threads_at_once_each_get_their_own_exact_figure() -> None:
    """Threads share the process's pagemap descriptor: none may close or replace it under another's scan.

    The interpreter switches threads as often as it can, so that a few thousand measurements meet
    the interleavings a busy server meets over hours.
    """
    threads = 4
    interval = sys.getswitchinterval()
    with validated_events(), ExitStack() as arenas_open:
        arenas = [arenas_open.enter_context(VmmArena.host(64 * MIB)) for _ in range(threads)]
        for index, arena in enumerate(arenas):  # more runs than one ioctl returns: several ioctls per scan
            arena.commit_many([(2 * page * PAGE_SIZE, PAGE_SIZE) for page in range(20 + index)])
        together = threading.Barrier(threads)

        def measure_often(arena: VmmArena) -> set[Measurement | None]:
            together.wait()
            return {arena.measure() for _ in range(2000)}

        sys.setswitchinterval(1e-6)
        try:
            with ThreadPoolExecutor(threads) as pool:
                figures = list(pool.map(measure_often, arenas))
        finally:
            sys.setswitchinterval(interval)
        assert figures == [{Measurement((20 + index) * PAGE_SIZE, "smaps_rss")} for index in range(threads)]


def test_a_process_that_is_pid_1_measures_its_arenas() -> None:
    """A container's entry point runs as PID 1: kvlog there opens its pagemap and measures like anywhere else."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to start a process as PID 1 of a new PID namespace")
    program = (
        "from kvlog.memory import VmmArena\n"
        "with VmmArena.host(64 << 20) as arena:\n"
        "    arena.commit(1 << 20, 3 << 20)\n"
    )
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--pid", "--fork", sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode and done.stderr.startswith("unshare:"):
        pytest.skip(f"no new PID namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stderr.splitlines()]  # kvlog's events go to stderr
    commit = next(event for event in events if event["event"] == "kv_arena.commit")
    assert (commit["pid"], commit["measured_committed_bytes"], commit["measurement_source"]) == (
        1,
        3 * MIB,
        "smaps_rss",
    )
