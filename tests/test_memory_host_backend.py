"""The host backend on its own: reservations fenced by guard pages, calls confined to them, each system
call's failure handled as the backend contract says, and the pagemap descriptor owned by its process.

Faults are the kernel's own failure values, planted at the backend's libc handle (``FailingLibc``);
what the kernel then holds is read back from /proc/self/maps and smaps.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from memory_helpers import FailingLibc, kernel_rss, last, validated_events

from kvlog.memory import ArenaError, BackendError, HostBackend, VmmArena, host_backend
from kvlog.memory.backend import Measurement
from kvlog.memory.host_backend import MADV_DONTNEED, MADV_POPULATE_WRITE, PAGE_SIZE, PROT_NONE, smaps_rss
from kvlog.memory.limits import ADDRESS_SPACE_LIMIT

P = PAGE_SIZE


def mapping_at(address: int) -> tuple[int, int, str] | None:
    """The mapping of this process that holds ``address``: its bounds and permissions."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        span, perms = line.split()[:2]
        low, high = (int(part, 16) for part in span.split("-"))
        if low <= address < high:
            return low, high, perms
    return None


@pytest.fixture
def backend() -> Iterator[HostBackend]:
    """A host backend whose reservations are released after the test, whatever it left mapped."""
    made = HostBackend()
    yield made
    for base, size in list(made._reservations.items()):
        made.release(base, size)


@pytest.fixture
def libc(monkeypatch: pytest.MonkeyPatch) -> FailingLibc:
    planted = FailingLibc()
    monkeypatch.setattr(host_backend, "_libc", planted)
    return planted


def test_a_reservation_lies_between_two_read_only_guard_pages_and_release_unmaps_all_three(
    backend: HostBackend,
) -> None:
    base = backend.reserve(4 * P)
    assert mapping_at(base) == (base, base + 4 * P, "---p")
    assert mapping_at(base - 1)[2] == mapping_at(base + 4 * P)[2] == "r--p"  # type: ignore[index]
    backend.map(base + P, P)
    assert mapping_at(base + P) == (base + P, base + 2 * P, "rw-p")
    backend.unmap(base + P, P)
    assert kernel_rss(base, base + 4 * P) == 0 and mapping_at(base + P)[2] == "---p"  # type: ignore[index]
    backend.release(base, 4 * P)
    assert [mapping_at(address) for address in (base - P, base, base + 3 * P, base + 4 * P)] == [None] * 4


def test_granularity_is_the_page_or_a_power_of_two_multiple_of_it() -> None:
    assert HostBackend().granularity == P and HostBackend(2 * P).granularity == 2 * P
    with pytest.raises(ArenaError, match=r"^granularity_bytes 12288 is not a power of two$"):
        HostBackend(3 * P)
    with pytest.raises(ArenaError, match=rf"^granularity_bytes {P + 1} is not a multiple of the page size"):
        HostBackend(P + 1)


def test_a_reservation_must_be_whole_granules() -> None:
    backend = HostBackend(2 * P)
    with pytest.raises(ArenaError, match=r"^reservation size 0 must be at least 1$"):
        backend.reserve(0)
    with pytest.raises(ArenaError, match=rf"^range \[base \+ 0, \+{3 * P}\) is not made of whole granules"):
        backend.reserve(3 * P)
    assert backend._reservations == {}


@pytest.mark.parametrize("call", ["map", "unmap"])
def test_calls_reach_the_kernel_only_for_whole_granules_inside_a_reservation(call: str) -> None:
    backend = HostBackend(2 * P)
    base = backend.reserve(8 * P)
    other = backend.reserve(2 * P)
    operation = getattr(backend, call)
    outside = [(base - P, P), (base - 2 * P, 2 * P), (base + 8 * P, 2 * P), (base + 6 * P, 4 * P), (base, 0)]
    if other == base + 9 * P:  # the next reservation right after this one's guard page: spanning both is outside too
        outside.append((base + 6 * P, 6 * P))
    for address, nbytes in outside:
        with pytest.raises(ArenaError, match="is not a non-empty range inside a reservation of this backend"):
            operation(address, nbytes)
    for address, nbytes in [(base + P, 2 * P), (base, P), (base + 2 * P, 3 * P)]:
        # The message says where the range starts in its reservation, which is where a caller looks.
        with pytest.raises(ArenaError, match=rf"^range \[base \+ {address - base}, \+{nbytes}\) is not made of whole"):
            operation(address, nbytes)
    backend.map(base + 6 * P, 2 * P)  # the last granule, ending where the reservation ends
    operation(base + 6 * P, 2 * P)
    backend.unmap(base, 8 * P)
    backend.release(base, 8 * P)
    backend.release(other, 2 * P)


@pytest.mark.parametrize("call", ["map", "unmap"])
def test_a_range_off_the_granule_grid_is_refused_at_every_page_of_a_granule(call: str) -> None:
    """The kernel aligns a reservation to the page only: granules are whole counted from its base.

    With 2 MiB granules (as on a GPU) the base is almost never on a 2 MiB boundary, so a check that
    counted granules from address 0, or from anywhere but the base, would let some page offset through.
    """
    granule = 512 * P
    backend = HostBackend(granule)
    base = backend.reserve(2 * granule)
    operation = getattr(backend, call)
    try:
        for offset in range(P, granule, P):
            with pytest.raises(ArenaError, match=rf"^range \[base \+ {offset}, \+{granule}\) is not made of whole"):
                operation(base + offset, granule)
        assert mapping_at(base) == (base, base + 2 * granule, "---p"), "no call reached the kernel"
    finally:
        backend.release(base, 2 * granule)


@pytest.mark.parametrize("call", ["map", "unmap", "release"])
def test_an_address_no_platform_has_is_refused_for_what_it_is(backend: HostBackend, call: str) -> None:
    """A negative or unaddressable range is named as such, not as one outside the reservations."""
    backend.reserve(2 * P)
    operation = getattr(backend, call)
    with pytest.raises(ArenaError, match=r"^offset -4096 must not be negative$"):
        operation(-P, P)
    with pytest.raises(ArenaError, match=rf"^range \[{P}, {P} \+ {ADDRESS_SPACE_LIMIT}\) ends past"):
        operation(P, ADDRESS_SPACE_LIMIT)


def test_a_reservation_the_kernel_cannot_fence_is_refused_and_leaves_nothing_mapped(libc: FailingLibc) -> None:
    """If the reservation cannot be made PROT_NONE, the arena must not exist: its memory would be readable."""
    libc.fail("mprotect", errno.ENOMEM)
    with validated_events() as captured, pytest.raises(ArenaError, match=r"reserve refused: mprotect failed: ENOMEM"):
        VmmArena.host(4 * P)
    assert last(captured, "kv_arena.error")["operation"] == "reserve"
    (outer, size) = next(args for name, args in libc.calls if name == "munmap")
    assert size == 6 * P and [mapping_at(address) for address in range(outer, outer + size, P)] == [None] * 6


def test_a_view_may_start_and_end_anywhere_inside_a_reservation(backend: HostBackend) -> None:
    base = backend.reserve(2 * P)
    backend.map(base, 2 * P)
    view = backend.tensor(base + 5, (3,), torch.uint8)
    view.fill_(9)
    assert view.data_ptr() == base + 5 and (ctypes_bytes(base + 4, 5)) == [0, 9, 9, 9, 0]
    with pytest.raises(ArenaError, match="inside a reservation"):
        backend.tensor(base + 2 * P - 1, (2,), torch.uint8)
    del view
    backend.unmap(base, 2 * P)


def ctypes_bytes(address: int, count: int) -> list[int]:
    return list(bytes((host_backend.ctypes.c_ubyte * count).from_address(address)))


def test_release_gives_back_only_what_was_reserved_and_only_once(backend: HostBackend) -> None:
    base = backend.reserve(4 * P)
    for start, size in [(base + P, 3 * P), (base, 2 * P)]:
        with pytest.raises(ArenaError, match="is not a reservation of this backend"):
            backend.release(start, size)
    backend.release(base, 4 * P)
    with pytest.raises(ArenaError, match="is not a reservation of this backend"):
        backend.release(base, 4 * P)
    with pytest.raises(ArenaError, match="inside a reservation"):
        backend.map(base, P)


def test_a_map_whose_populate_fails_leaves_the_range_reserved_only(backend: HostBackend, libc: FailingLibc) -> None:
    base = backend.reserve(4 * P)
    libc.fail("madvise", errno.ENOMEM, lambda _address, _nbytes, advice: advice == MADV_POPULATE_WRITE)
    with pytest.raises(BackendError) as failed:
        backend.map(base + P, 2 * P)
    assert (str(failed.value), failed.value.still_held) == (
        "madvise(MADV_POPULATE_WRITE) failed: ENOMEM (Cannot allocate memory)",
        None,
    )
    assert mapping_at(base + P) == (base, base + 4 * P, "---p") and kernel_rss(base, base + 4 * P) == 0


def test_a_map_that_cannot_be_undone_names_the_range_it_still_holds(backend: HostBackend, libc: FailingLibc) -> None:
    base = backend.reserve(4 * P)
    libc.fail("madvise", errno.ENOMEM, lambda _address, _nbytes, advice: advice == MADV_POPULATE_WRITE)
    libc.fail("mmap", errno.ENOMEM)
    libc.fail("mprotect", errno.ENOMEM, lambda _address, _nbytes, prot: prot == PROT_NONE)
    with pytest.raises(BackendError) as failed:
        backend.map(base + P, 2 * P)
    assert str(failed.value) == "mmap failed: ENOMEM (Cannot allocate memory)"
    assert failed.value.still_held == ((base + P, 2 * P),)
    assert isinstance(failed.value.__cause__, BackendError) and failed.value.__cause__.call.startswith("madvise")
    assert mapping_at(base + P) == (base + P, base + 3 * P, "rw-p")
    libc.failing.clear()
    backend.unmap(base + P, 2 * P)


def test_a_kernel_without_populate_gets_zeroed_memory_held_by_writing_it(
    backend: HostBackend, libc: FailingLibc
) -> None:
    """Before Linux 5.14 MADV_POPULATE_WRITE is EINVAL: the backend writes zeros instead, and stops asking."""
    base = backend.reserve(8 * P)
    libc.fail("madvise", errno.EINVAL, lambda _address, _nbytes, advice: advice == MADV_POPULATE_WRITE)
    backend.map(base, 2 * P)
    backend.map(base + 4 * P, 3 * P)
    assert kernel_rss(base, base + 8 * P) == 5 * P
    assert set(ctypes_bytes(base, 2 * P)) == {0} and set(ctypes_bytes(base + 4 * P, 3 * P)) == {0}
    assert [name for name, _ in libc.calls].count("madvise") == 1, "asked once, then never again"
    backend.unmap(base, 8 * P)


def test_an_unmap_whose_fresh_mapping_fails_gives_the_pages_back_in_place(
    backend: HostBackend, libc: FailingLibc
) -> None:
    """At the mapping limit the replacing mmap fails with ENOMEM: PROT_NONE and MADV_DONTNEED do it instead."""
    base = backend.reserve(4 * P)
    backend.map(base, 4 * P)
    libc.fail("mmap", errno.ENOMEM)
    backend.unmap(base + P, 2 * P)
    assert kernel_rss(base, base + 4 * P) == 2 * P and mapping_at(base + P) == (base + P, base + 3 * P, "---p")
    for name, prot_or_advice in (("mprotect", PROT_NONE), ("madvise", MADV_DONTNEED)):
        libc.fail(name, errno.ENOMEM, lambda _address, _nbytes, value, wanted=prot_or_advice: value == wanted)
        with pytest.raises(BackendError, match=r"^mmap failed: ENOMEM"):
            backend.unmap(base, P)
        del libc.failing[name]
    libc.failing.clear()
    backend.unmap(base, 4 * P)


def test_the_pagemap_descriptor_is_opened_once_per_process_and_not_inherited_by_programs_it_starts() -> None:
    pagemap = host_backend._Pagemap()
    descriptor = pagemap.fd()
    try:
        assert pagemap.fd() == descriptor
        assert os.readlink(f"/proc/self/fd/{descriptor}") == f"/proc/{os.getpid()}/pagemap"
        assert fcntl.fcntl(descriptor, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        opened = len(os.listdir("/proc/self/fd"))
        pagemap._pid = -1  # as in a child of fork: the inherited descriptor names the parent
        descriptor = pagemap.fd()
        assert len(os.listdir("/proc/self/fd")) == opened, "the inherited descriptor was closed"
        assert os.readlink(f"/proc/self/fd/{descriptor}") == f"/proc/{os.getpid()}/pagemap"
    finally:
        os.close(descriptor)


def test_without_stdin_the_pagemap_descriptor_is_zero_and_a_forked_child_still_closes_it() -> None:
    """A daemon runs with descriptor 0 closed, so the pagemap file gets it: 0 is a descriptor like any other."""
    try:
        saved: int | None = os.dup(0)
    except OSError:  # already closed here
        saved = None
    else:
        os.close(0)
    pagemap = host_backend._Pagemap()
    try:
        assert pagemap.fd() == 0
        opened = len(os.listdir("/proc/self/fd"))
        pagemap._pid = -1  # as in a child of fork: the inherited descriptor names the parent
        assert pagemap.fd() == 0
        assert len(os.listdir("/proc/self/fd")) == opened, "the inherited descriptor was closed"
    finally:
        for descriptor in {0, pagemap._fd} - {-1}:
            os.close(descriptor)
        if saved is not None:
            os.dup2(saved, 0)
            os.close(saved)


def test_without_pagemap_the_backend_reads_smaps_and_without_either_it_says_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host_backend, "_pagemap", host_backend._Pagemap())
    monkeypatch.setattr(host_backend, "_PAGEMAP", tmp_path / "no-pagemap")  # ENOENT: no such file
    with validated_events(), VmmArena.host(8 * P) as arena:
        arena.commit(P, 3 * P)
        assert arena.measure() == Measurement(3 * P, "smaps_rss")
        assert host_backend._pagemap.scans is False
        monkeypatch.setattr(host_backend, "_SMAPS", tmp_path / "no-smaps")
        assert arena.measure() is None


def test_smaps_counts_a_range_exactly_and_refuses_one_that_cuts_a_resident_mapping(backend: HostBackend) -> None:
    base = backend.reserve(8 * P)
    backend.map(base, 2 * P)  # [base, base + 2P) is one read-write mapping, the rest another
    assert smaps_rss(base, base + 8 * P) == Measurement(2 * P, "smaps_rss")
    assert smaps_rss(base, base + 2 * P) == Measurement(2 * P, "smaps_rss")
    assert smaps_rss(base + 2 * P, base + 8 * P) == Measurement(0, "smaps_rss")  # starts where the pages end
    assert smaps_rss(base + P, base + 8 * P) is None  # half of a resident mapping: not attributable
    assert host_backend.pagemap_rss(base + P, base + 8 * P) == Measurement(P, "smaps_rss")
    text = host_backend._smaps_below(base + 2 * P)
    starts = [int(head, 16) for head in host_backend._VMA_HEAD.findall(text)]
    assert starts[-1] == base and all(start < base + 2 * P for start in starts)
    backend.unmap(base, 2 * P)
