"""What the memory tests share: the kernel's own view of an address range, and a validating pipeline."""

from __future__ import annotations

import ctypes
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch

from kvlog.emission import configure
from kvlog.memory import BackendError, host_backend
from kvlog.memory.backend import Measurement
from kvlog.memory.host_backend import HostBackend
from kvlog.memory.intervals import RunSet
from kvlog.testing import capture_events


def gpu_or_skip() -> tuple[Any, Any]:
    """torch and ``cuda.bindings.driver`` when a GPU is visible; else skip the calling module.

    ``KVLOG_REQUIRE_CUDA=1`` (set on the GPU machine) turns a missing GPU into a failure, so a broken
    install there cannot pass as a skip. CI has neither torch's CUDA build nor cuda-bindings.
    """
    reason = None
    try:
        import torch  # noqa: PLC0415 - only the GPU tests need it, and only if it is there
        from cuda.bindings import driver  # noqa: PLC0415
    except ImportError as missing:
        reason = f"cuda-bindings or torch missing: {missing}"
    else:
        if not torch.cuda.is_available():
            reason = "no CUDA GPU visible to torch"
    if reason is not None:
        if os.environ.get("KVLOG_REQUIRE_CUDA") == "1":
            pytest.fail(f"KVLOG_REQUIRE_CUDA=1 but {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
    return torch, driver


def kernel_rss(start: int, end: int) -> int:
    """Resident bytes in ``[start, end)`` read straight from /proc/self/smaps, independently of kvlog.

    Fails if a mapping with resident pages straddles an edge: then the range's Rss is not exact.
    """
    total = 0
    inside = straddles = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(" ", 1)[0]
        if "-" in head and ":" not in head:
            low, high = (int(part, 16) for part in head.split("-"))
            inside = low < end and high > start
            straddles = low < start or high > end
        elif inside and line.startswith("Rss:"):
            rss = int(line.split()[1]) * 1024
            assert not (rss and straddles), f"mapping {head} straddles [{start:#x}, {end:#x}) with {rss} B resident"
            total += rss
    return total


def mappings_in(start: int, end: int) -> int:
    """How many mappings of this process overlap ``[start, end)``."""
    count = 0
    for line in Path("/proc/self/maps").read_text().splitlines():
        low, high = (int(part, 16) for part in line.split(" ", 1)[0].split("-"))
        count += low < end and high > start
    return count


@contextmanager
def validated_events() -> Iterator[list[dict[str, Any]]]:
    """Every event emitted in the block, each validated against the catalog (an invalid one raises)."""
    configure(output="json", validation="raise", stream=io.BytesIO())
    with capture_events() as captured:
        yield captured


def last(captured: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The most recent event called ``name``."""
    matching = [event for event in captured if event["event"] == name]
    assert matching, f"no {name} event among {[event['event'] for event in captured]}"
    return matching[-1]


def own_fields(event: dict[str, Any]) -> dict[str, Any]:
    """An event without what varies from run to run (time, pid, ranks), for comparing it whole.

    Its ``duration_us``, where it has one, is left out too, after checking that it is a time: a
    non-negative float in whole nanoseconds.
    """
    fields = {key: value for key, value in event.items() if key not in ("timestamp", "pid", "ranks")}
    if "duration_us" in fields:
        duration = fields.pop("duration_us")
        assert isinstance(duration, float) and duration >= 0 and round(duration, 3) == duration, duration
    return fields


Held = tuple[tuple[int, int], ...]


class FaultyBackend(HostBackend):
    """Real host memory, except where a test plants a fault at the backend boundary.

    ``fail(call, address)`` makes that call (``reserve``, ``map``, ``unmap``, ``release``) at that
    address fail with ``BackendError`` as long as the fault is planted. As the backend contract
    says, a failed ``map`` holds nothing and a failed ``unmap`` holds everything, unless
    ``still_held`` names what stays: then exactly that is really held and the rest really is not.
    ``unmeasurable`` makes ``measure`` say nothing; ``copies`` makes ``tensor`` return a copy.
    """

    def __init__(self, granularity: int | None = None) -> None:
        super().__init__(granularity)
        self.faults: dict[tuple[str, int], Held | None] = {}
        self.unmeasurable = False
        self.copies = False

    def fail(self, call: str, address: int = 0, still_held: Held | None = None) -> None:
        self.faults[call, address] = still_held

    def _planted(self, call: str, address: int) -> BackendError | None:
        if (call, address) not in self.faults:
            return None
        error = BackendError(call, "EIO", "planted")
        error.still_held = self.faults[call, address]
        return error

    def reserve(self, nbytes: int) -> int:
        error = self._planted("reserve", 0)
        if error is not None:
            raise error
        return super().reserve(nbytes)

    def map(self, address: int, nbytes: int) -> None:
        error = self._planted("map", address)
        if error is None:
            return super().map(address, nbytes)
        for start, size in error.still_held or ():
            super().map(start, size)
        raise error

    def unmap(self, address: int, nbytes: int) -> None:
        error = self._planted("unmap", address)
        if error is None:
            return super().unmap(address, nbytes)
        if error.still_held is not None:
            held = RunSet()
            for start, size in error.still_held:
                held.add(start, start + size)
            for start, end in held.gaps(address, address + nbytes):
                super().unmap(start, end - start)
        raise error

    def release(self, base: int, nbytes: int) -> None:
        error = self._planted("release", base)
        if error is not None:
            raise error
        super().release(base, nbytes)

    def measure(self, base: int, nbytes: int) -> Measurement | None:
        return None if self.unmeasurable else super().measure(base, nbytes)

    def tensor(self, address: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        view = super().tensor(address, shape, dtype)
        return view.clone() if self.copies else view


class FailingLibc:
    """The host backend's libc, except the calls a test makes fail: each with its errno, while its condition holds.

    Every call is recorded, so that a test can also say which calls were made.
    """

    def __init__(self) -> None:
        self._real = host_backend._libc
        self.failing: dict[str, tuple[int, Any]] = {}
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def fail(self, name: str, code: int, when: Any = lambda *_: True) -> None:
        self.failing[name] = (code, when)

    def __getattr__(self, name: str) -> Any:
        function = getattr(self._real, name)

        def call(*args: Any) -> Any:
            self.calls.append((name, args))
            code, when = self.failing.get(name, (0, None))
            if when is not None and when(*args):
                ctypes.set_errno(code)
                return host_backend._MAP_FAILED if name == "mmap" else -1
            return function(*args)

        return call
