"""CUDA virtual memory management on ``cuda.bindings.driver`` (cuda-python 13) for ``VmmArena.cuda``.

Physical memory is created one granule at a time, each granule with its own allocation handle, so
that any granule-aligned subrange of a commit can be given back later (``cuMemUnmap`` cannot split a
mapping). The backend works in the device's primary context, the one torch's runtime uses, so its
memory is usable by torch kernels and captured CUDA graphs without copies.

Measured bytes are ``cuMemGetInfo`` deltas bracketing each map and unmap, taken under a per-device
lock that every backend of this process shares. NVML per-process use was not chosen: it counts the
whole process (the CUDA context, torch's caching allocator), so a delta of it has the same blind spot
as ``cuMemGetInfo`` with none of its availability (NVML cannot see processes from inside many
containers, and would be another dependency). The limit, stated in docs/memory.md: ``cuMemGetInfo`` is
device-wide, so memory that another thread of this process (outside this backend) or another process
allocates or frees *during* a map or unmap call is attributed to the arena; allocations between
calls are not. The driver's own overhead for our mappings (page tables) is counted, because the
device really spends it.

Every size, offset and address is checked (``kvlog.memory.limits``) and found inside a reservation
of this backend before it reaches a driver call: the bindings would raise ``OverflowError`` on a size
past ``size_t``, and a wrong address would map over memory that is not ours.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from math import prod
from typing import Any, Final, Literal

import torch
from cuda.bindings import driver

from kvlog.memory.backend import BackendName, Measurement
from kvlog.memory.dlpack import borrowed_bytes
from kvlog.memory.errors import ArenaError, BackendError
from kvlog.memory.limits import ADDRESS_SPACE_LIMIT, checked_granularity, checked_int, checked_range

HandleType = Literal["NONE", "POSIX_FD", "FABRIC"]

_HANDLE_TYPES: Final[dict[str, tuple[Any, Any]]] = {
    "NONE": (driver.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE, None),
    "POSIX_FD": (
        driver.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
    ),
    "FABRIC": (
        driver.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_FABRIC,
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED,
    ),
}

_SUCCESS: Final = driver.CUresult.CUDA_SUCCESS


def _error(call: str, result: Any) -> BackendError:
    """A ``BackendError`` naming the driver call, the CUresult's name and the driver's description."""
    name_err, name = driver.cuGetErrorName(result)
    text_err, text = driver.cuGetErrorString(result)
    code = name.decode() if name_err == _SUCCESS and name else f"CUresult {int(result)}"
    detail = text.decode() if text_err == _SUCCESS and text else ""
    return BackendError(call, code, detail)


def _check(call: str, returned: tuple[Any, ...]) -> Any:
    """Raise unless the CUresult in ``returned[0]`` is success; return the single output, if any."""
    if returned[0] != _SUCCESS:
        raise _error(call, returned[0])
    return returned[1] if len(returned) > 1 else None


@functools.cache
def _device_lock(ordinal: int) -> threading.Lock:
    """One lock per device for the whole process, so that bracketing measurements never overlap."""
    return threading.Lock()


_primary_lock = threading.Lock()


@functools.cache
def _primary_context(ordinal: int) -> tuple[Any, Any]:
    """Retain the device's primary context once per process and keep it, as the CUDA runtime does.

    Releasing it when a backend is dropped could destroy the context under torch's feet if torch has
    not retained it yet, taking every allocation with it.
    """
    with _primary_lock:
        _check("cuInit", driver.cuInit(0))
        device = _check("cuDeviceGet", driver.cuDeviceGet(ordinal))
        return device, _check("cuDevicePrimaryCtxRetain", driver.cuDevicePrimaryCtxRetain(device))


@dataclass
class _Reservation:
    nbytes: int
    measured: int = 0


def _runs(granules: list[int], step: int) -> list[tuple[int, int]]:
    """Ascending granule addresses as maximal ``(start, end)`` runs of adjacent granules."""
    runs: list[tuple[int, int]] = []
    for granule in granules:
        if runs and runs[-1][1] == granule:
            runs[-1] = (runs[-1][0], granule + step)
        else:
            runs.append((granule, granule + step))
    return runs


class CudaBackend:
    """Reserve, map, unmap and measure device memory through the CUDA driver's VMM API."""

    name: BackendName = "cuda"

    def __init__(
        self, device: int = 0, handle_type: HandleType = "NONE", *, granularity_bytes: int | None = None
    ) -> None:
        """Bind to ``device``'s primary context; ``handle_type`` other than NONE makes memory exportable.

        NONE is the default because POSIX_FD handles are only needed to share memory with another
        process, and FABRIC handles additionally need an IMEX daemon; both are checked against the
        device's attributes here rather than failing at the first commit.

        ``granularity_bytes`` (a multiple of the driver's minimum, 2 MiB on an H200) sets the size of
        one physical handle, and with it the unit of commit and decommit. The driver's cost is per
        handle, not per byte, so coarser granules commit large pools several times faster (see
        BENCHMARKS.md) at the price of coarser decommits.
        """
        if handle_type not in _HANDLE_TYPES:
            raise ValueError(f"handle_type must be one of {sorted(_HANDLE_TYPES)}, not {handle_type!r}")
        device = checked_int("device", device, limit=(1 << 31) - 1)  # a CUdevice ordinal is a C int
        self.device: int | None = device
        self.handle_type: str | None = handle_type
        self._cu_device, self._context = _primary_context(device)
        self._context_id = int(self._context)
        self._lock = _device_lock(device)
        self._torch_device = torch.device("cuda", device)
        self._reservations: dict[int, _Reservation] = {}
        self._handles: dict[int, Any] = {}
        self._unreleased: dict[int, Any] = {}  # granules unmapped whose cuMemRelease failed: still held
        requested, attribute = _HANDLE_TYPES[handle_type]
        self._require_attribute(
            driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "VMM"
        )
        if attribute is not None:
            self._require_attribute(attribute, f"{handle_type} handles")
        self._prop = driver.CUmemAllocationProp()
        self._prop.type = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        self._prop.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        self._prop.location.id = device
        self._prop.requestedHandleTypes = requested
        self._access = driver.CUmemAccessDesc()
        self._access.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        self._access.location.id = device
        self._access.flags = driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        with self._current():
            self._minimum = int(
                _check(
                    "cuMemGetAllocationGranularity",
                    driver.cuMemGetAllocationGranularity(
                        self._prop, driver.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM
                    ),
                )
            )
        self.granularity: int = (
            self._minimum
            if granularity_bytes is None
            else checked_granularity(
                granularity_bytes, self._minimum, "the driver's minimum granularity", power_of_two=False
            )
        )

    def _require_attribute(self, attribute: Any, what: str) -> None:
        if not _check("cuDeviceGetAttribute", driver.cuDeviceGetAttribute(attribute, self._cu_device)):
            raise BackendError("cuDeviceGetAttribute", "CUDA_ERROR_NOT_SUPPORTED", f"device {self.device}: no {what}")

    @contextmanager
    def _current(self) -> Iterator[None]:
        """Run in the primary context: make it current on a thread that has none, as the runtime would.

        A thread that has another context current (its own, not torch's) gets it back afterwards.
        """
        current = _check("cuCtxGetCurrent", driver.cuCtxGetCurrent())
        current_id = int(current) if current is not None else 0
        if current_id == self._context_id:
            yield
        elif current_id == 0:
            _check("cuCtxSetCurrent", driver.cuCtxSetCurrent(self._context))
            yield
        else:
            _check("cuCtxPushCurrent", driver.cuCtxPushCurrent(self._context))
            try:
                yield
            finally:
                _check("cuCtxPopCurrent", driver.cuCtxPopCurrent())

    def _mem_info(self) -> tuple[int, int]:
        returned = driver.cuMemGetInfo()
        if returned[0] != _SUCCESS:
            raise _error("cuMemGetInfo", returned[0])
        return int(returned[1]), int(returned[2])

    def _aligned(self, offset: int, nbytes: int) -> None:
        """Granules count from the reservation's base: a granularity need not be a power of two."""
        if nbytes <= 0 or offset % self.granularity or nbytes % self.granularity:
            raise ArenaError(
                f"range [base + {offset}, +{nbytes}) is not made of whole granules ({self.granularity} B each)"
            )

    def _reservation_of(self, address: int, nbytes: int, *, granules: bool = True) -> tuple[int, int, _Reservation]:
        """The checked ``(address, nbytes)`` and the reservation holding it (whole granules unless told)."""
        address, nbytes = checked_range(address, nbytes)
        for base, reservation in self._reservations.items():
            if nbytes and base <= address and address + nbytes <= base + reservation.nbytes:
                if granules:
                    self._aligned(address - base, nbytes)
                return address, nbytes, reservation
        raise ArenaError(
            f"range [{address:#x}, +{nbytes}) is not a non-empty range inside a reservation of the backend"
        )

    def reserve(self, nbytes: int) -> int:
        """Reserve address space; the driver backs none of it.

        Aligned to the driver's minimum granularity (a power of two, as the alignment must be), which
        aligns every granule even when ``granularity_bytes`` is not a power of two.
        """
        nbytes = checked_int("reservation size", nbytes, minimum=1, limit=ADDRESS_SPACE_LIMIT)
        self._aligned(0, nbytes)
        with self._lock, self._current():
            base = int(_check("cuMemAddressReserve", driver.cuMemAddressReserve(nbytes, self._minimum, 0, 0)))
            self._reservations[base] = _Reservation(nbytes)
        return base

    def map(self, address: int, nbytes: int) -> None:
        """Create and map one physical granule at a time, then grant read-write access to the range.

        Access is set once over the whole range (the driver allows any fully mapped range), which is
        what torch's expandable segments do too. On failure everything this call created is unmapped
        and released before ``BackendError`` names the failing call (see ``_undo`` for a failing
        rollback).
        """
        step = self.granularity
        prop = self._prop
        with self._lock, self._current():
            address, nbytes, reservation = self._reservation_of(address, nbytes)
            mapped = [a for a in range(address, address + nbytes, step) if a in self._handles or a in self._unreleased]
            if mapped:
                raise ValueError(f"granule {mapped[0]:#x} is already mapped")
            free_before, _ = self._mem_info()
            created: list[tuple[int, Any]] = []
            try:
                for granule in range(address, address + nbytes, step):
                    err, handle = driver.cuMemCreate(step, prop, 0)
                    if err != _SUCCESS:
                        raise _error("cuMemCreate", err)
                    (err,) = driver.cuMemMap(granule, step, 0, handle, 0)
                    if err != _SUCCESS:
                        failure = _error("cuMemMap", err)
                        _check(f"cuMemRelease (rolling back after {failure.call})", driver.cuMemRelease(handle))
                        raise failure
                    created.append((granule, handle))
                _check("cuMemSetAccess", driver.cuMemSetAccess(address, nbytes, [self._access], 1))
            except BackendError as failure:
                self._undo(created, failure)
                raise
            else:
                self._handles.update(created)
            finally:
                free_after, _ = self._mem_info()
                reservation.measured += free_before - free_after

    def _undo(self, created: list[tuple[int, Any]], failure: BackendError) -> None:
        """Unmap and release what a failed map created, newest first.

        Should the driver refuse an unmap or a release here too, the granules still holding memory
        stay on this backend's books (so ``unmap`` can give them back later and ``measure`` keeps
        counting them), the error, chained onto the original, names the rollback call, and its
        ``still_held`` tells the arena to keep them on its books too.
        """
        for index in range(len(created) - 1, -1, -1):
            granule, handle = created[index]
            (err,) = driver.cuMemUnmap(granule, self.granularity)
            if err != _SUCCESS:
                self._handles.update(created[: index + 1])
                raise self._held(_error(f"cuMemUnmap (rolling back after {failure.call})", err), created[: index + 1])
            (err,) = driver.cuMemRelease(handle)
            if err != _SUCCESS:
                self._handles.update(created[:index])
                self._unreleased[granule] = handle
                raise self._held(_error(f"cuMemRelease (rolling back after {failure.call})", err), created[: index + 1])

    def _held(self, error: BackendError, granules: list[tuple[int, Any]]) -> BackendError:
        error.still_held = tuple((granule, self.granularity) for granule, _ in granules)
        return error

    def unmap(self, address: int, nbytes: int) -> None:
        """Unmap the range in one call, then release each granule's handle, once the device is idle.

        ``cuMemUnmap`` and ``cuMemRelease`` do not wait for kernels still reading the memory (torch
        synchronizes before them for the same reason), so the context is synchronized first. One
        ``cuMemUnmap`` may span many whole mappings (seen on an H200, and it halves the cost).
        """
        step = self.granularity
        with self._lock, self._current():
            address, nbytes, reservation = self._reservation_of(address, nbytes)
            granules = range(address, address + nbytes, step)
            missing = [a for a in granules if a not in self._handles and a not in self._unreleased]
            if missing:
                raise ValueError(f"granule {missing[0]:#x} is not mapped")
            _check("cuCtxSynchronize", driver.cuCtxSynchronize())
            free_before, _ = self._mem_info()
            try:
                # Granules a refused release left unmapped are only released again (see _unreleased).
                for start, end in _runs([a for a in granules if a in self._handles], step):
                    _check("cuMemUnmap", driver.cuMemUnmap(start, end - start))
                    for granule in range(start, end, step):
                        self._unreleased[granule] = self._handles.pop(granule)
                refused = None
                for granule in granules:  # one refused release does not keep the others held
                    (err,) = driver.cuMemRelease(self._unreleased[granule])
                    if err == _SUCCESS:
                        del self._unreleased[granule]
                    elif refused is None:
                        refused = _error("cuMemRelease", err)
                if refused is not None:
                    raise refused
            except BackendError as error:
                error.still_held = tuple((a, step) for a in granules if a in self._handles or a in self._unreleased)
                raise
            finally:
                free_after, _ = self._mem_info()
                reservation.measured += free_before - free_after

    def release(self, base: int, nbytes: int) -> None:
        """Free a reservation whose granules are all unmapped."""
        base, nbytes = checked_range(base, nbytes)
        with self._lock, self._current():
            reservation = self._reservations.get(base)
            if reservation is None or reservation.nbytes != nbytes:
                raise ArenaError(f"[{base:#x}, +{nbytes}) is not a reservation of this backend")
            if any(base <= a < base + nbytes for a in (*self._handles, *self._unreleased)):
                raise ValueError(f"reservation {base:#x} still has mapped granules")
            _check("cuMemAddressFree", driver.cuMemAddressFree(base, nbytes))
            del self._reservations[base]

    def measure(self, base: int, nbytes: int) -> Measurement | None:
        """Device memory the driver gave or took back during this reservation's maps and unmaps.

        Only a whole reservation can be measured: a device-wide counter cannot attribute bytes to a
        subrange, so anything else returns None.
        """
        with self._lock:
            reservation = self._reservations.get(base)
            if reservation is None or reservation.nbytes != nbytes:
                return None
            return Measurement(reservation.measured, "cuMemGetInfo")

    def tensor(self, address: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A zero-copy tensor at ``address``, which may still be unmapped (see ``kvlog.memory.dlpack``).

        The bytes are viewed as ``dtype`` afterwards, so bfloat16 and the float8 types work too.
        """
        with self._lock:
            address, nbytes, _ = self._reservation_of(address, prod(shape) * dtype.itemsize, granules=False)
        return borrowed_bytes(address, nbytes, self._torch_device).view(dtype).view(shape)
