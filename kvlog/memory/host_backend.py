"""Linux virtual memory as a ``VmmArena`` backend: the CUDA VMM semantics, testable without a GPU.

Reserving is ``mmap(PROT_NONE, MAP_NORESERVE)``: address space with neither pages nor commit charge,
like ``cuMemAddressReserve``. Committing makes a range read-write and populates it at once
(``MADV_POPULATE_WRITE``), so the memory is really held when the call returns, like ``cuMemCreate``
+ ``cuMemMap``. Decommitting maps a fresh ``PROT_NONE|MAP_NORESERVE`` range over the old one with
``MAP_FIXED``: that drops the pages *and* the commit charge in one step, which ``MADV_DONTNEED`` alone
does not do, and keeps the addresses reserved.

Measurement sums ``Rss`` over the arena's mappings in ``/proc/self/smaps``: the kernel's own count of
resident pages. Each reservation is fenced by a read-only guard page on either side so that the
kernel never merges an arena's mappings with a neighbour's, which would make its Rss unattributable.

Every call checks its range against the reservations this backend made before it reaches the
kernel: ``mmap(MAP_FIXED)`` over any other address would replace another mapping of the process.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from math import prod
from mmap import MADV_DONTNEED, MAP_ANONYMOUS, MAP_PRIVATE, PROT_READ, PROT_WRITE
from pathlib import Path
from typing import Final

import torch

from kvlog.memory.backend import BackendError, BackendName, Measurement
from kvlog.memory.limits import ADDRESS_SPACE_LIMIT, ArenaError, checked_granularity, checked_int, checked_range

# Linux ABI values that Python's mmap module lacks, identical on x86_64 and aarch64; the rest come from it.
PROT_NONE: Final = 0x0
MAP_FIXED: Final = 0x10
MAP_NORESERVE: Final = 0x4000
MADV_POPULATE_WRITE: Final = 23

PAGE_SIZE: Final = os.sysconf("SC_PAGE_SIZE")
_MAP_FAILED: Final = ctypes.c_void_p(-1).value
_SMAPS = Path("/proc/self/smaps")
_VMA_HEAD = re.compile(rb"^([0-9a-f]+)-[0-9a-f]+ ", re.MULTILINE)
_VMA_RSS = re.compile(rb"^([0-9a-f]+)-([0-9a-f]+) [^\n]*\n(?:[^\n]*\n)*?Rss:\s+(\d+) kB", re.MULTILINE)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


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
        return base

    def _whole_granules(self, offset: int, nbytes: int) -> None:
        if offset % self.granularity or nbytes % self.granularity:
            raise ArenaError(
                f"range [base + {offset}, +{nbytes}) is not made of whole granules ({self.granularity} B each)"
            )

    def _inside(self, address: object, nbytes: object, *, granules: bool = True) -> tuple[int, int]:
        """``(address, nbytes)`` checked to be non-empty (whole granules) inside one reservation of this backend."""
        start, size = checked_range(address, nbytes)
        for base, reserved in self._reservations.items():
            if size and base <= start and start + size <= base + reserved:
                if granules:
                    self._whole_granules(start - base, size)
                return start, size
        raise ArenaError(f"range [{start:#x}, +{size}) is not a non-empty range inside a reservation of this backend")

    def map(self, address: int, nbytes: int) -> None:
        """Read-write and populated; on a failure the range is reserved-only again, or named in ``still_held``."""
        address, nbytes = self._inside(address, nbytes)
        try:
            _check("mprotect", _libc.mprotect(address, nbytes, PROT_READ | PROT_WRITE))
            self._fill(address, nbytes)
        except BackendError as failure:
            try:
                self.unmap(address, nbytes)
            except BackendError as rollback:
                rollback.still_held = ((address, nbytes),)
                raise rollback from failure
            raise

    def _fill(self, address: int, nbytes: int) -> None:
        """Populate now rather than on first touch, so that committed means held."""
        if self._populate:
            if _libc.madvise(address, nbytes, MADV_POPULATE_WRITE) == 0:
                return
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
        address, nbytes = self._inside(address, nbytes)
        try:
            _mmap(address, nbytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED)
        except BackendError as error:
            if _libc.mprotect(address, nbytes, PROT_NONE) != 0 or _libc.madvise(address, nbytes, MADV_DONTNEED):
                raise error from None

    def release(self, base: int, nbytes: int) -> None:
        """Unmap the reservation and its guard pages."""
        start, size = checked_range(base, nbytes)
        if self._reservations.get(start) != size:
            raise ArenaError(f"[{start:#x}, +{size}) is not a reservation of this backend")
        _check("munmap", _libc.munmap(start - PAGE_SIZE, size + 2 * PAGE_SIZE))
        del self._reservations[start]

    def measure(self, base: int, nbytes: int) -> Measurement | None:
        """Rss of the mappings inside ``[base, base + nbytes)``; None if one straddles its edge with pages in it.

        None too when smaps cannot be read: a measurement is evidence beside the books, and failing to
        take one must not turn a commit that succeeded into an exception.
        """
        try:
            return smaps_rss(base, base + nbytes)
        except OSError:
            return None

    def tensor(self, address: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """``torch.frombuffer`` over a ctypes array at ``address``; the tensor keeps the array alive."""
        address, nbytes = self._inside(address, prod(shape) * dtype.itemsize, granules=False)
        buffer = (ctypes.c_ubyte * nbytes).from_address(address)
        return torch.frombuffer(buffer, dtype=dtype).view(shape)


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
