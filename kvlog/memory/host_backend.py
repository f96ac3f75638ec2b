"""Linux virtual memory as a ``VmmArena`` backend: the CUDA VMM semantics, testable without a GPU.

Reserving is ``mmap(PROT_NONE, MAP_NORESERVE)``: address space with neither pages nor commit charge,
like ``cuMemAddressReserve``. Committing makes a range read-write and populates it at once
(``MADV_POPULATE_WRITE``), so the memory is really held when the call returns, like ``cuMemCreate``
+ ``cuMemMap``. Decommitting maps a fresh ``PROT_NONE|MAP_NORESERVE`` range over the old one with
``MAP_FIXED``: that drops the pages *and* the commit charge in one step, which ``MADV_DONTNEED`` alone
does not do, and keeps the addresses reserved.

Measurement is the ``Rss`` that ``/proc/self/smaps`` gives the reservation: the kernel's own count of
the pages mapped in it, the shared zero page excepted. Since Linux 6.7 it is read with one
``PAGEMAP_SCAN`` ioctl, asking for pages present and not the zero page: the same page tables,
classified as smaps classifies them, without generating smaps' text for every mapping below the
arena (hundreds of times cheaper for one granule). The walk covers the span of the reservation that
can hold a page (``_Exposure``: what this backend made accessible and has not replaced by a fresh
mapping since, and what it gave back since the last measurement), not the arena's books: a range a
decommit failed to give back stays in it. ``mincore`` would be cheaper still, but it counts the
zero page and swap-cache pages as resident. Older kernels read smaps itself, over the whole
reservation. Each reservation is fenced by a read-only guard page on either side so
that the kernel never merges an arena's mappings with a neighbour's, which would make the mapping's
smaps Rss unattributable.

Every call checks its range against the reservations this backend made before it reaches the
kernel: ``mmap(MAP_FIXED)`` over any other address would replace another mapping of the process.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import threading
from math import prod
from mmap import MADV_DONTNEED, MAP_ANONYMOUS, MAP_PRIVATE, PROT_READ, PROT_WRITE
from pathlib import Path
from typing import Final

import torch

from kvlog.memory.backend import BackendName, Measurement

# Linux ABI values that Python's mmap module lacks, identical on x86_64 and aarch64; the rest come from it.
from kvlog.memory.errors import ArenaError, BackendError
from kvlog.memory.intervals import Run, RunSet
from kvlog.memory.limits import ADDRESS_SPACE_LIMIT, checked_granularity, checked_int, checked_range

PROT_NONE: Final = 0x0
MAP_FIXED: Final = 0x10
MAP_NORESERVE: Final = 0x4000
MADV_POPULATE_WRITE: Final = 23

PAGE_SIZE: Final = os.sysconf("SC_PAGE_SIZE")
_MAP_FAILED: Final = ctypes.c_void_p(-1).value
_FRESH_RESERVATION: Final = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED  # what unmap maps over a range
_SMAPS = Path("/proc/self/smaps")
_PAGEMAP = Path("/proc/self/pagemap")
_VMA_HEAD = re.compile(rb"^([0-9a-f]+)-[0-9a-f]+ ", re.MULTILINE)
_VMA_RSS = re.compile(rb"^([0-9a-f]+)-([0-9a-f]+) [^\n]*\n(?:[^\n]*\n)*?Rss:\s+(\d+) kB", re.MULTILINE)

# PAGEMAP_SCAN (linux/fs.h, Linux 6.7): the page categories asked for, and the ioctl's structures.
PAGE_IS_PRESENT: Final = 1 << 3
PAGE_IS_PFNZERO: Final = 1 << 5


class _PageRegion(ctypes.Structure):
    _fields_ = [("start", ctypes.c_uint64), ("end", ctypes.c_uint64), ("categories", ctypes.c_uint64)]


class _ScanArg(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "size",
            "flags",
            "start",
            "end",
            "walk_end",
            "vec",
            "vec_len",
            "max_pages",
            "category_inverted",
            "category_mask",
            "category_anyof_mask",
            "return_mask",
        )
    ]


PAGEMAP_SCAN: Final = (3 << 30) | (ctypes.sizeof(_ScanArg) << 16) | (ord("f") << 8) | 16  # _IOWR('f', 16, ...)
_SCAN_REQUEST: Final = ctypes.c_ulong(PAGEMAP_SCAN)
_SCAN_REGIONS: Final = 16  # runs of resident pages per ioctl; a walk that finds more goes on where it stopped

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
# Its own handle: the scan only reads page tables, and stays out of what replaces _libc to watch the calls
# that change mappings.
# No argtypes: converting three arguments on every call costs a third of the call; the request is
# passed as a prebuilt unsigned long, the descriptor as a C int, the argument by reference.
_ioctl = ctypes.CDLL(None, use_errno=True).ioctl


def _os_error(call: str) -> BackendError:
    code = ctypes.get_errno()
    return BackendError(call, errno.errorcode.get(code, str(code)), os.strerror(code))


def _mmap(address: int | None, nbytes: int, prot: int, flags: int) -> int:
    result = _libc.mmap(address, nbytes, prot, flags, -1, 0)
    if result is None or result == _MAP_FAILED:
        raise _os_error("mmap")
    return int(result)


def _check(call: str, result: int) -> None:
    if result != 0:
        raise _os_error(call)


class HostBackend:
    """Anonymous private memory of this process, reserved, committed and given back by the page."""

    name: BackendName = "host"
    device: int | None = None
    handle_type: str | None = None

    def __init__(self, granularity: int | None = None) -> None:
        """``granularity`` defaults to the page size; a larger one must be a power-of-two multiple of it.

        A power of two, so that every granule of a reservation (which the kernel aligns to the page
        only) stays aligned to the page, and addressable, or ``ArenaError``.
        """
        self.granularity = (
            PAGE_SIZE
            if granularity is None
            else checked_granularity(granularity, PAGE_SIZE, "the page size", power_of_two=True)
        )
        self._populate = True
        self._reservations: dict[int, int] = {}
        self._exposures: dict[int, _Exposure] = {}  # by reservation base; see measure()

    def reserve(self, nbytes: int) -> int:
        """Address space between two guard pages; neither costs memory nor commit charge."""
        size = checked_int("reservation size", nbytes, minimum=1, limit=ADDRESS_SPACE_LIMIT - 2 * PAGE_SIZE)
        self._whole_granules(0, size)
        outer = _mmap(None, size + 2 * PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
        base = outer + PAGE_SIZE
        if _libc.mprotect(base, size, PROT_NONE) != 0:
            error = _os_error("mprotect")
            _libc.munmap(outer, size + 2 * PAGE_SIZE)
            raise error
        self._reservations[base] = size
        self._exposures[base] = _Exposure()
        return base

    def _whole_granules(self, offset: int, nbytes: int) -> None:
        if offset % self.granularity or nbytes % self.granularity:
            raise ArenaError(
                f"range [base + {offset}, +{nbytes}) is not made of whole granules ({self.granularity} B each)"
            )

    def _inside(self, address: object, nbytes: object, *, granules: bool = True) -> tuple[int, int, int]:
        """``(address, nbytes)`` checked to be non-empty (whole granules) inside one reservation of this backend.

        Returns them as plain ints with the base of their reservation. Plain ints go straight to
        the reservation test, which bounds them as ``checked_range`` would; anything else is
        converted by it first, and a refused range gets its reason.
        """
        if type(address) is int and type(nbytes) is int:
            start, size = address, nbytes
        else:
            start, size = checked_range(address, nbytes)
        for base, reserved in self._reservations.items():
            if size > 0 and base <= start and start + size <= base + reserved:
                if granules and ((start - base) % self.granularity or size % self.granularity):
                    self._whole_granules(start - base, size)
                return start, size, base
        start, size = checked_range(start, size)  # a negative or unaddressable int: that reason first
        raise ArenaError(f"range [{start:#x}, +{size}) is not a non-empty range inside a reservation of this backend")

    def map(self, address: int, nbytes: int) -> None:
        """Read-write and populated; on a failure the range is reserved-only again, or named in ``still_held``."""
        address, nbytes, base = self._inside(address, nbytes)
        self._exposures[base].may_hold.add(address, address + nbytes)  # before the kernel can put a page there
        try:
            if _libc.mprotect(address, nbytes, PROT_READ | PROT_WRITE) != 0:
                raise _os_error("mprotect")
            if not self._populate or _libc.madvise(address, nbytes, MADV_POPULATE_WRITE) != 0:
                self._fill(address, nbytes)
        except BackendError as failure:
            try:
                self.unmap(address, nbytes)
            except BackendError as rollback:
                rollback.still_held = ((address, nbytes),)
                raise rollback from failure
            raise

    def _fill(self, address: int, nbytes: int) -> None:
        """Populate now rather than on first touch, so that committed means held.

        Called when ``MADV_POPULATE_WRITE`` failed (with its errno still set) or is known missing.
        """
        if self._populate:
            if ctypes.get_errno() != errno.EINVAL:  # EINVAL: a kernel before 5.14, without the advice
                raise _os_error("madvise(MADV_POPULATE_WRITE)")
            self._populate = False
        ctypes.memset(address, 0, nbytes)

    def unmap(self, address: int, nbytes: int) -> None:
        """Replace the range by a fresh reservation: pages and commit charge go back to the kernel.

        The replacing ``mmap`` needs a new mapping and fails with ENOMEM at the process's mapping limit
        (``vm.max_map_count``), where it is most needed: undoing a commit that failed for lack of
        memory. Then ``mprotect(PROT_NONE)`` and ``MADV_DONTNEED`` give the pages back in place; were
        the range left readable and writable, a failed commit would leave memory that no book counts.
        """
        address, nbytes, base = self._inside(address, nbytes)
        replaced = _libc.mmap(address, nbytes, PROT_NONE, _FRESH_RESERVATION, -1, 0)
        if replaced is None or replaced == _MAP_FAILED:
            error = _os_error("mmap")
            if _libc.mprotect(address, nbytes, PROT_NONE) != 0 or _libc.madvise(address, nbytes, MADV_DONTNEED):
                raise error from None
            return  # given back in place: the range stays among those measure() scans
        self._exposures[base].replaced(address, address + nbytes)

    def release(self, base: int, nbytes: int) -> None:
        """Unmap the reservation and its guard pages."""
        start, size = checked_range(base, nbytes)
        if self._reservations.get(start) != size:
            raise ArenaError(f"[{start:#x}, +{size}) is not a reservation of this backend")
        _check("munmap", _libc.munmap(start - PAGE_SIZE, size + 2 * PAGE_SIZE))
        del self._reservations[start]
        del self._exposures[start]

    def measure(self, base: int, nbytes: int) -> Measurement | None:
        """Rss of ``[base, base + nbytes)``: by ``PAGEMAP_SCAN``, or by smaps where the kernel lacks it.

        The scan walks only the part of a reservation that can hold a page (see ``_Exposure``):
        the rest of it is address space that no call of this backend ever made accessible, or
        that a fresh mapping has replaced since, and the kernel gives such a mapping no page.
        None when neither can be read, or when smaps has a mapping straddle the range's edge with
        pages in it: a measurement is evidence beside the books, and failing to take one must not
        turn a commit that succeeded into an exception.
        """
        try:
            if _pagemap.scans:
                start, end = self._scanned(base, base + nbytes)
                try:
                    return pagemap_rss(start, end) if start < end else _NOTHING_HELD
                except OSError as error:
                    if error.errno not in _NO_SCAN:
                        raise
                    _pagemap.scans = False
            return smaps_rss(base, base + nbytes)
        except OSError:
            return None

    def _scanned(self, start: int, end: int) -> Run:
        """The part of ``[start, end)`` a scan must walk to count every page in it.

        Inside one reservation: the span of what may hold pages there, and of what was given back
        since the reservation was last measured whole (so that the kernel is asked about the
        range an operation touched, and says it is empty). Anything else is walked whole.
        """
        whole = self._reservations.get(start)  # the arena measures from its base: found without a search
        candidates = ((start, whole),) if whole is not None else self._reservations.items()
        for base, reserved in candidates:
            if base <= start and end <= base + reserved:
                exposure = self._exposures[base]
                span = exposure.may_hold.hull(start, end)
                low, high = (span[0], span[1]) if span else (end, start)
                if exposure.given_back_high > exposure.given_back_low:
                    low = min(low, max(exposure.given_back_low, start))
                    high = max(high, min(exposure.given_back_high, end))
                    if start == base and end == base + reserved:
                        exposure.given_back_low, exposure.given_back_high = 0, 0
                return low, high
        return start, end

    def tensor(self, address: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """``torch.frombuffer`` over a ctypes array at ``address``; the tensor keeps the array alive."""
        address, nbytes, _ = self._inside(address, prod(shape) * dtype.itemsize, granules=False)
        buffer = (ctypes.c_ubyte * nbytes).from_address(address)
        return torch.frombuffer(buffer, dtype=dtype).view(shape)


class _Exposure:
    """Where one reservation can hold pages: what ``measure`` must walk, and what it may leave out.

    An anonymous mapping the kernel has just made holds no page, and one that is ``PROT_NONE``
    cannot get one: no access faults a page in, ``MADV_POPULATE_*`` and ``mlock`` refuse or skip
    it. So a page can only be where this backend made the memory accessible (``map``), until a
    fresh ``PROT_NONE`` mapping replaces it (``unmap``'s ``mmap(MAP_FIXED)``). ``may_hold`` is
    every such range, added before the ``mprotect`` that opens it and removed only once the
    replacing ``mmap`` has succeeded; a range given back in place (``MADV_DONTNEED``) or not at
    all stays in it. ``given_back_low``/``given_back_high`` span what was replaced since the last
    whole-reservation measurement, which still walks it once. The only pages this cannot see are
    put there behind the backend's back: by another ``mprotect`` of its addresses (which its
    contract forbids), or by a writer that forces its way past the protection (a debugger's
    ``ptrace``, ``/proc/<pid>/mem``).
    """

    __slots__ = ("given_back_high", "given_back_low", "may_hold")

    def __init__(self) -> None:
        self.may_hold = RunSet()
        self.given_back_low = self.given_back_high = 0

    def replaced(self, start: int, end: int) -> None:
        """``[start, end)`` is a fresh mapping again."""
        self.may_hold.remove(start, end)
        if self.given_back_high > self.given_back_low:
            self.given_back_low, self.given_back_high = min(self.given_back_low, start), max(self.given_back_high, end)
        else:
            self.given_back_low, self.given_back_high = start, end


#: this process's id, renewed in a child of ``fork``: asking the kernel costs a system call per measurement
_process = [os.getpid()]
os.register_at_fork(after_in_child=lambda: _process.__setitem__(0, os.getpid()))


class _Pagemap:
    """``/proc/self/pagemap``, opened once per process: a child of ``fork`` opens its own.

    The file is bound to the process that opened it, so an inherited descriptor would measure the
    parent's memory; the child closes it, which also lets go of the parent's ``mm`` it pins.
    """

    def __init__(self) -> None:
        self.scans = True
        self._pid = 0
        self._fd = -1
        self._lock = threading.Lock()

    def fd(self) -> int:
        pid = _process[0]
        if self._pid != pid:
            with self._lock:
                if self._pid != pid:
                    if self._fd >= 0:
                        os.close(self._fd)
                    self._fd = os.open(_PAGEMAP, os.O_RDONLY | os.O_CLOEXEC)
                    self._pid = pid
        return self._fd


class _ScanBuffers(threading.local):
    """One thread's ioctl argument and result regions, reused: building them costs as much as the ioctl."""

    def __init__(self) -> None:
        self.regions = (_PageRegion * _SCAN_REGIONS)()
        self.arg = _ScanArg(
            size=ctypes.sizeof(_ScanArg),
            vec=ctypes.addressof(self.regions),
            vec_len=_SCAN_REGIONS,
            category_inverted=PAGE_IS_PFNZERO,
            category_mask=PAGE_IS_PRESENT | PAGE_IS_PFNZERO,
            return_mask=PAGE_IS_PRESENT,
        )
        self.pointer = ctypes.byref(self.arg)
        self.words = memoryview(self.regions).cast("B").cast("Q")  # start, end, categories of each region


_pagemap = _Pagemap()
_buffers = _ScanBuffers()
# The errors that say this process cannot scan at all, so smaps is read from then on: ENOTTY from a
# kernel before 6.7, whose pagemap has no ioctl; no pagemap file, or one this process may not read.
# Any other error fails one measurement only.
_NO_SCAN: Final = frozenset({errno.ENOTTY, errno.ENOENT, errno.EACCES, errno.EPERM})
_NOTHING_HELD: Final = Measurement(0, "smaps_rss")  # what a scan of no page table at all would say


def pagemap_rss(start: int, end: int) -> Measurement:
    """What smaps counts as ``Rss`` in ``[start, end)`` (page-aligned), from one ``PAGEMAP_SCAN`` walk.

    smaps counts a mapped page unless it is the shared zero page (its ``vm_normal_page`` test); the
    scan asks for exactly those pages, present and not ``PFNZERO``, and returns them as runs. Holes
    without page tables cost nothing, so the cost grows with the resident pages and the 2 MiB
    blocks the range spans, not with the process's other mappings. ``OSError`` where the kernel
    has no such ioctl (before 6.7: ENOTTY). The one state in which the two may differ is transient:
    a page the kernel is migrating at that instant (compaction, NUMA balancing) is a migration
    entry, which smaps counts and the scan files as swapped.
    """
    descriptor = _pagemap.fd()
    buffers = _buffers
    scan, words, pointer = buffers.arg, buffers.words, buffers.pointer
    scan.end = end
    total = 0
    while start < end:
        scan.start = start
        found = _ioctl(descriptor, _SCAN_REQUEST, pointer)
        if found < 0:
            code = ctypes.get_errno()
            raise OSError(code, f"PAGEMAP_SCAN: {os.strerror(code)}", str(_PAGEMAP))
        if found:
            total += sum(words[1 : 3 * found : 3]) - sum(words[0 : 3 * found : 3])
        start = scan.walk_end
    return Measurement(total, "smaps_rss")


def smaps_rss(start: int, end: int) -> Measurement | None:
    """Resident bytes of this process's mappings that lie inside ``[start, end)``, per ``/proc/self/smaps``.

    The kernel lists mappings in address order and generates the file as it is read, walking each
    mapping's page tables; reading stops at the first mapping past ``end``, so the cost grows with the
    mappings below the arena, not with all of the process's (torch maps hundreds).
    """
    text = _smaps_below(end)
    total = 0
    for match in _VMA_RSS.finditer(text):
        vma_start, vma_end = int(match[1], 16), int(match[2], 16)
        if vma_end <= start or vma_start >= end:
            continue
        rss = int(match[3]) * 1024
        if rss and (vma_start < start or vma_end > end):
            return None
        total += rss
    return Measurement(total, "smaps_rss")


def _smaps_below(end: int) -> bytes:
    """The entries of ``/proc/self/smaps`` for the mappings that start below ``end``."""
    text = bytearray()
    with _SMAPS.open("rb", buffering=0) as smaps:
        while chunk := smaps.read(1 << 16):
            scan_from = text.rfind(b"\n") + 1  # a header may straddle two reads
            text += chunk
            for header in _VMA_HEAD.finditer(text, scan_from):
                if int(header[1], 16) >= end:
                    return bytes(text[: header.start()])
    return bytes(text)
