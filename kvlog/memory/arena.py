"""``VmmArena``: reserved address space whose physical backing is committed and given back by range.

The arena is the one place that keeps the books: which granules are backed, which tensor views are
alive over which bytes, and what the kernel or driver says is really held. Every operation emits its
typed event with both figures, so a log can never again present a reservation as memory.

Semantics, shared by both backends:

- Ranges are rounded outwards to the granularity: the start down, the end up (an empty range stays
  empty). The event's
  ``offset_bytes``/``nbytes`` are the rounded range, ``requested_nbytes`` what the caller asked for.
- ``commit`` makes a whole range backed. Granules already backed are left alone and not counted
  again, so committing a range twice is harmless; ``decommit`` likewise skips unbacked granules.
- A commit is all or nothing: when the backend fails half-way (out of memory), the granules this call
  mapped are unmapped again, the books stay exact and a ``kv_arena.error`` event says what happened.
- ``decommit`` refuses a range that a live tensor view from ``tensor()`` overlaps (using it would
  fault), ``close`` refuses while any view is alive. ``sleep`` is the deliberate exception: it gives
  back all physical memory under live views, keeping their addresses so captured CUDA graphs stay
  valid; the caller promises not to touch the memory until ``wake`` backs the same ranges again
  (with zeroed memory: a KV cache is recomputed, not preserved).
- One lock serialises the operations of an arena, so events appear in the order the books changed.
"""

from __future__ import annotations

import gc
import itertools
import os
import threading
import time
import weakref
from dataclasses import dataclass
from math import prod
from typing import Literal

import torch

from kvlog import events
from kvlog.emission import emit
from kvlog.errors import KvlogError
from kvlog.memory.backend import Backend, BackendError, Measurement, MeasurementSource
from kvlog.memory.closing import ClosesOnExit
from kvlog.memory.host_backend import HostBackend
from kvlog.memory.intervals import Run, RunSet

Operation = Literal["reserve", "commit", "decommit", "close", "sleep", "wake"]

_arena_numbers = itertools.count()
_arena_numbers_lock = threading.Lock()


class ArenaError(KvlogError):
    """An arena operation was refused or failed; a ``kv_arena.error`` event was emitted with it."""


@dataclass(frozen=True)
class ArenaChange:
    """What a ``sleep`` or ``wake`` changed: bytes by the books and as measured before/after."""

    bookkept_bytes: int
    measured_bytes: int | None
    measurement_source: MeasurementSource | None
    duration_us: float


def _next_arena_id() -> str:
    with _arena_numbers_lock:
        return f"{os.getpid()}_{next(_arena_numbers)}"


def _align_up(value: int, granularity: int) -> int:
    return -(-value // granularity) * granularity


class VmmArena(ClosesOnExit):
    """A reservation of ``reserved_va_bytes`` of address space on one backend; see the module docstring."""

    def __init__(self, backend: Backend, reserve_bytes: int) -> None:
        """Reserve ``reserve_bytes`` (rounded up to the granularity) and emit ``kv_arena.ready``."""
        self._backend = backend
        self._granularity = backend.granularity
        self._arena_id = _next_arena_id()
        self._lock = threading.Lock()
        self._committed = RunSet()
        self._views: list[tuple[weakref.ref[torch.Tensor], int, int]] = []
        self._asleep: list[Run] | None = None
        self._closed = False
        self._reserved = _align_up(reserve_bytes, self._granularity)
        if reserve_bytes <= 0:
            raise self._refuse("reserve", None, reserve_bytes, "the reservation must be larger than 0 bytes")
        try:
            self._base = backend.reserve(self._reserved)
        except BackendError as exc:
            self._closed = True
            raise self._refuse("reserve", None, self._reserved, str(exc)) from exc
        emit(
            events.KvArenaReady(
                arena_id=self._arena_id,
                backend=backend.name,
                device=backend.device,
                reserved_va_bytes=self._reserved,
                granularity_bytes=self._granularity,
                handle_type=backend.handle_type,
            )
        )

    @classmethod
    def host(cls, reserve_bytes: int, *, granularity_bytes: int | None = None) -> VmmArena:
        """An arena of this process's virtual memory; granularity defaults to the page size."""
        return cls(HostBackend(granularity_bytes), reserve_bytes)

    @classmethod
    def cuda(cls, device: int = 0, *, reserve_bytes: int) -> VmmArena:
        """An arena of device memory through the CUDA driver's VMM API (needs the ``cuda`` extra)."""
        from kvlog.memory.cuda_backend import CudaBackend  # noqa: PLC0415 - cuda-bindings only when asked for

        return cls(CudaBackend(device), reserve_bytes)

    @property
    def arena_id(self) -> str:
        """``<pid>_<n>``, unique in this process, as sglang prints it."""
        return self._arena_id

    @property
    def backend(self) -> Backend:
        """The backend holding the memory."""
        return self._backend

    @property
    def base(self) -> int:
        """Address of the first reserved byte."""
        return self._base

    @property
    def reserved_va_bytes(self) -> int:
        """Address space reserved: an upper bound that costs no memory."""
        return self._reserved

    @property
    def granularity_bytes(self) -> int:
        """Every committed range starts and ends on a multiple of this."""
        return self._granularity

    @property
    def committed_bytes(self) -> int:
        """Physical bytes backing the arena now, by the books."""
        return self._committed.total

    @property
    def committed_runs(self) -> list[Run]:
        """The backed ``(start, end)`` offset ranges, in address order."""
        with self._lock:
            return self._committed.runs()

    @property
    def asleep(self) -> bool:
        """Whether ``sleep`` gave the memory back and ``wake`` has not yet restored it."""
        return self._asleep is not None

    @property
    def closed(self) -> bool:
        """Whether ``close`` gave everything back."""
        return self._closed

    def measure(self) -> Measurement | None:
        """What the kernel or driver says backs the arena now, if it can say."""
        with self._lock:
            self._require_open("measure")
            return self._backend.measure(self._base, self._reserved)

    def commit(self, offset: int, nbytes: int) -> None:
        """Back ``[offset, offset + nbytes)`` (rounded outwards) with physical memory."""
        self.commit_many([(offset, nbytes)])

    def commit_many(self, ranges: list[tuple[int, int]]) -> None:
        """Back several ``(offset, nbytes)`` ranges, all or none: one failure rolls back the others."""
        with self._lock:
            self._require_awake("commit", ranges)
            aligned = [self._align("commit", offset, nbytes) for offset, nbytes in ranges]
            self._map_all(aligned, [nbytes for _, nbytes in ranges], "commit")

    def decommit(self, offset: int, nbytes: int, *, force: bool = False) -> None:
        """Give back the physical memory of ``[offset, offset + nbytes)`` (rounded outwards).

        ``force`` decommits under live views too: for undoing a growth that no view has used yet.
        """
        with self._lock:
            self._require_awake("decommit", [(offset, nbytes)])
            start, end = self._align("decommit", offset, nbytes)
            users = 0 if force else self._views_over(start, end)
            if users:
                raise self._refuse(
                    "decommit",
                    start,
                    end - start,
                    f"{users} live tensor view(s) use bytes in [{start}, {end}); drop them first (or sleep())",
                )
            started = time.perf_counter()
            self._unmap(start, end, "decommit")
            self._emit_decommit(start, end, nbytes, _elapsed_us(started))

    def sleep(self) -> ArenaChange:
        """Give back all physical memory, live views included, keeping the addresses for ``wake``."""
        with self._lock:
            self._require_awake("sleep", [])
            before = self._backend.measure(self._base, self._reserved)
            runs = self._asleep = self._committed.runs()
            duration = 0.0
            for start, end in runs:
                started = time.perf_counter()
                self._unmap(start, end, "sleep")
                duration += _elapsed_us(started)
                self._emit_decommit(start, end, end - start, _elapsed_us(started))
            after = self._backend.measure(self._base, self._reserved)
            freed = sum(end - start for start, end in runs)
            return ArenaChange(freed, _delta(before, after), _source(after), duration)

    def wake(self) -> ArenaChange:
        """Back again every range ``sleep`` gave back, all or none; the memory comes back zeroed."""
        with self._lock:
            self._require_open("wake")
            if self._asleep is None:
                raise self._refuse("wake", None, None, "the arena is not asleep")
            before = self._backend.measure(self._base, self._reserved)
            duration = self._map_all(self._asleep, [end - start for start, end in self._asleep], "wake")
            restored = sum(end - start for start, end in self._asleep)
            self._asleep = None
            after = self._backend.measure(self._base, self._reserved)
            return ArenaChange(restored, _delta(after, before), _source(after), duration)

    def tensor(
        self, offset: int, shape: tuple[int, ...], dtype: torch.dtype, *, require_committed: bool = True
    ) -> torch.Tensor:
        """A zero-copy view of the arena at ``offset``: ``data_ptr() == base + offset``.

        With ``require_committed=False`` the view may extend over reserved but unbacked bytes, as a
        KV pool's buffers do before post-capture sizing; touching those bytes faults.
        """
        nbytes = prod(shape) * dtype.itemsize
        with self._lock:
            self._require_open("tensor")
            if nbytes <= 0 or offset < 0 or offset % dtype.itemsize or offset + nbytes > self._reserved:
                raise ArenaError(
                    f"arena {self._arena_id}: a {dtype} view of {nbytes} bytes at offset {offset} must be non-empty, "
                    f"aligned to {dtype.itemsize} bytes and inside the {self._reserved}-byte reservation"
                )
            if require_committed and (self._asleep is not None or self._committed.gaps(offset, offset + nbytes)):
                raise ArenaError(
                    f"arena {self._arena_id}: bytes [{offset}, {offset + nbytes}) are not all committed; "
                    "commit them first or pass require_committed=False"
                )
            view = self._backend.tensor(self._base + offset, shape, dtype)
            if view.data_ptr() != self._base + offset:
                raise ArenaError(f"arena {self._arena_id}: backend returned a copy, not a view at offset {offset}")
            root = view._base if view._base is not None else view
            self._views_over(0, 0)  # forget dead views, so that creating many never grows the list
            self._views.append((weakref.ref(root), offset, offset + nbytes))
            return view

    def close(self) -> None:
        """Give back the physical memory and the reservation; refused while a tensor view is alive."""
        with self._lock:
            if self._closed:
                return
            if self._views_over(0, self._reserved):
                gc.collect()  # views kept alive only by reference cycles are not in use
            users = self._views_over(0, self._reserved)
            if users:
                raise self._refuse("close", None, None, f"{users} live tensor view(s) still use the arena")
            released = self._committed.total
            for start, end in self._committed.runs():
                self._unmap(start, end, "close")
            try:
                self._backend.release(self._base, self._reserved)
            except BackendError as exc:
                raise self._refuse("close", None, None, str(exc)) from exc
            self._closed = True
            self._asleep = None
            emit(events.KvArenaClosed(arena_id=self._arena_id, released_bytes=released))

    def __repr__(self) -> str:
        state = "closed" if self._closed else "asleep" if self._asleep is not None else "open"
        return (
            f"VmmArena({self._arena_id}, {self._backend.name}, reserved_va={self._reserved}, "
            f"committed={self._committed.total}, {state})"
        )

    # Everything below runs with the lock held.

    def _require_open(self, operation: str) -> None:
        if self._closed:
            raise ArenaError(f"arena {self._arena_id} is closed; {operation} refused")

    def _require_awake(self, operation: Operation, ranges: list[tuple[int, int]]) -> None:
        offset, nbytes = ranges[0] if len(ranges) == 1 else (None, None)
        if self._closed:
            raise self._refuse(operation, offset, nbytes, "the arena is closed")
        if self._asleep is not None:
            raise self._refuse(operation, offset, nbytes, "the arena is asleep; wake() it first")

    def _align(self, operation: Operation, offset: int, nbytes: int) -> Run:
        if offset < 0 or nbytes < 0:
            raise self._refuse(operation, offset, nbytes, f"offset {offset} and size {nbytes} must not be negative")
        start = offset - offset % self._granularity
        end = _align_up(offset + nbytes, self._granularity) if nbytes else start  # an empty range stays empty
        if end > self._reserved:
            raise self._refuse(
                operation,
                start,
                end - start,
                f"[{start}, {end}) goes past the {self._reserved}-byte reservation",
            )
        return start, end

    def _views_over(self, start: int, end: int) -> int:
        self._views = [(ref, lo, hi) for ref, lo, hi in self._views if ref() is not None]
        return sum(1 for _, lo, hi in self._views if lo < end and hi > start)

    def _map_all(self, aligned: list[Run], requested: list[int], operation: Operation) -> float:
        """Map the gaps of every range, undoing this call's mappings if one fails; one event per range.

        Returns the time spent mapping, in microseconds.
        """
        mapped: list[Run] = []
        timings: list[float] = []
        try:
            for start, end in aligned:
                started = time.perf_counter()
                for gap_start, gap_end in self._committed.gaps(start, end):
                    self._backend.map(self._base + gap_start, gap_end - gap_start)
                    mapped.append((gap_start, gap_end))
                    self._committed.add(gap_start, gap_end)
                timings.append(_elapsed_us(started))
        except BackendError as exc:
            start, end = aligned[len(timings)]
            message = self._undo(mapped, exc)
            for held_start, held_end in self._held(exc):  # what the backend could not give back stays counted
                self._committed.add(held_start, held_end)
                message += f"; [{held_start}, {held_end}) could not be rolled back and stays committed"
            raise self._refuse(operation, start, end - start, message) from exc
        measured = self._backend.measure(self._base, self._reserved)
        for (start, end), asked, duration in zip(aligned, requested, timings, strict=True):
            emit(
                events.KvArenaCommit(
                    arena_id=self._arena_id,
                    offset_bytes=start,
                    nbytes=end - start,
                    requested_nbytes=asked,
                    committed_bytes=self._committed.total,
                    measured_committed_bytes=measured.nbytes if measured else None,
                    measurement_source=_source(measured),
                    duration_us=duration,
                )
            )
        return sum(timings)

    def _undo(self, mapped: list[Run], error: BackendError) -> str:
        """Unmap what a failed call mapped; the message says what failed and what could not be undone."""
        message = f"{error}; {len(mapped)} range(s) this call had mapped were given back"
        for start, end in reversed(mapped):
            try:
                self._backend.unmap(self._base + start, end - start)
            except BackendError as exc:
                message += f"; except [{start}, {end}): its rollback failed too ({exc}), it stays committed"
                continue
            self._committed.remove(start, end)
        return message

    def _unmap(self, start: int, end: int, operation: Operation) -> None:
        """Unmap what is backed in ``[start, end)``, keeping the books exact if the backend fails."""
        for run_start, run_end in self._committed.covered(start, end):
            try:
                self._backend.unmap(self._base + run_start, run_end - run_start)
            except BackendError as exc:
                if exc.still_held is not None:  # the backend says exactly what it still holds of the run
                    self._committed.remove(run_start, run_end)
                    for held_start, held_end in self._held(exc):
                        self._committed.add(held_start, held_end)
                raise self._refuse(operation, start, end - start, str(exc)) from exc
            self._committed.remove(run_start, run_end)

    def _held(self, error: BackendError) -> list[Run]:
        """The offset ranges a failed backend call says still hold memory."""
        return [(address - self._base, address - self._base + n) for address, n in error.still_held or ()]

    def _emit_decommit(self, start: int, end: int, requested: int, duration: float) -> None:
        measured = self._backend.measure(self._base, self._reserved)
        emit(
            events.KvArenaDecommit(
                arena_id=self._arena_id,
                offset_bytes=start,
                nbytes=end - start,
                requested_nbytes=requested,
                committed_bytes=self._committed.total,
                measured_committed_bytes=measured.nbytes if measured else None,
                measurement_source=_source(measured),
                duration_us=duration,
            )
        )

    def _refuse(self, operation: Operation, offset: int | None, nbytes: int | None, reason: str) -> ArenaError:
        """Emit ``kv_arena.error`` and return the exception for the caller to raise."""
        emit(
            events.KvArenaError(
                arena_id=self._arena_id,
                operation=operation,
                offset_bytes=offset if offset is None or offset >= 0 else None,  # a negative one is in `error`
                nbytes=nbytes if nbytes is None or nbytes >= 0 else None,
                error=reason,
                committed_bytes=self._committed.total,
            ),
            level="error",
        )
        return ArenaError(f"arena {self._arena_id}: {operation} refused: {reason}")


def _source(measured: Measurement | None) -> MeasurementSource | None:
    return measured.source if measured else None


def _delta(larger: Measurement | None, smaller: Measurement | None) -> int | None:
    """Bytes between two measurements of the same arena; None unless both exist."""
    if larger is None or smaller is None:
        return None
    return larger.nbytes - smaller.nbytes


def _elapsed_us(started: float) -> float:
    """Microseconds since ``started`` (a ``perf_counter`` reading), to the nanosecond."""
    return round((time.perf_counter() - started) * 1e6, 3)
