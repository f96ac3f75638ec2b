"""Hostile sizes and offsets against the CUDA backend (issue 9, item 14), on a GPU (``pytest -m cuda``).

The driver module the backend sees is a spy: every ``cuMemAddressReserve``, ``cuMemCreate``,
``cuMemMap``, ``cuMemSetAccess``, ``cuMemUnmap`` and ``cuMemAddressFree`` is checked for sizes the
platform can address and for addresses inside a reservation the spy saw being made, before the
real driver is called. Physical memory beyond a small cap is answered CUDA_ERROR_OUT_OF_MEMORY, as
a full device would, so that no example holds much of the GPU. Every entry point either works or
raises ``ArenaError`` (``PoolSizingError`` for a pool's token counts); the device has exactly as much
free memory at the end as at the start.
"""

from __future__ import annotations

import gc
import platform
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_helpers import gpu_or_skip, validated_events

pytestmark = pytest.mark.cuda

torch, driver = gpu_or_skip()

from kvlog.memory import ArenaError, KVShape, MHAKVPool, PoolSizingError, VmmArena, cuda_backend  # noqa: E402
from kvlog.memory.cuda_backend import CudaBackend  # noqa: E402

MiB = 1 << 20
LIMIT = 1 << {"aarch64": 48, "arm64": 48}.get(platform.machine().lower(), 47)
CAP = 64 * MiB  # physical memory the spy lets exist at once
EDGES = [0, 1, -1, 2 * MiB - 1, 2 * MiB, 3 * MiB, 1 << 31, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 1 << 64, 1 << 70]
EDGES += [LIMIT - 2 * MiB, LIMIT, LIMIT + 2 * MiB, -(1 << 64)]
hostile = st.one_of(
    st.sampled_from(EDGES),
    st.sampled_from([True, 2.0 * MiB, float("nan"), None, "2097152"]),
    st.integers(min_value=-(1 << 80), max_value=1 << 80),
    st.integers(min_value=0, max_value=1 << 27).map(lambda n: n * 4096),
)
SETTINGS = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
SUCCESS = driver.CUresult.CUDA_SUCCESS
OOM = driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY


class DriverSpy:
    """The driver module, with the memory calls checked before the real driver sees them."""

    def __init__(self) -> None:
        self.reservations: dict[int, int] = {}
        self.handles: dict[int, int] = {}
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        function = getattr(driver, name)
        check = getattr(type(self), f"spy_{name}", None)
        if check is None:
            return function

        def spied(*args: Any) -> Any:
            self.calls += 1
            return check(self, function, *args)

        return spied

    def inside(self, call: str, address: Any, size: Any) -> None:
        address = int(address)
        assert isinstance(size, int) and 0 < size <= LIMIT, f"{call} of {size!r} bytes: wrapped or unaddressable"
        assert any(base <= address and address + size <= base + n for base, n in self.reservations.items()), (
            f"{call}({address:#x}, {size}) is outside every reservation"
        )

    def spy_cuMemAddressReserve(self, real: Any, size: Any, alignment: Any, address: Any, flags: Any) -> Any:
        assert isinstance(size, int) and 0 < size <= LIMIT, f"cuMemAddressReserve({size!r}): wrapped or unaddressable"
        result = real(size, alignment, address, flags)
        if result[0] == SUCCESS:
            self.reservations[int(result[1])] = size
        return result

    def spy_cuMemCreate(self, real: Any, size: Any, prop: Any, flags: Any) -> Any:
        assert isinstance(size, int) and 0 < size <= LIMIT, f"cuMemCreate({size!r}): wrapped or unaddressable"
        if sum(self.handles.values()) + size > CAP:
            return (OOM, None)
        result = real(size, prop, flags)
        if result[0] == SUCCESS:
            self.handles[int(result[1])] = size
        return result

    def spy_cuMemRelease(self, real: Any, handle: Any) -> Any:
        result = real(handle)
        if result[0] == SUCCESS:
            self.handles.pop(int(handle), None)
        return result

    def spy_cuMemMap(self, real: Any, address: Any, size: Any, offset: Any, handle: Any, flags: Any) -> Any:
        self.inside("cuMemMap", address, size)
        return real(address, size, offset, handle, flags)

    def spy_cuMemSetAccess(self, real: Any, address: Any, size: Any, descs: Any, count: Any) -> Any:
        self.inside("cuMemSetAccess", address, size)
        return real(address, size, descs, count)

    def spy_cuMemUnmap(self, real: Any, address: Any, size: Any) -> Any:
        self.inside("cuMemUnmap", address, size)
        return real(address, size)

    def spy_cuMemAddressFree(self, real: Any, address: Any, size: Any) -> Any:
        assert self.reservations.get(int(address)) == size, f"cuMemAddressFree({int(address):#x}, {size!r})"
        result = real(address, size)
        if result[0] == SUCCESS:
            del self.reservations[int(address)]
        return result


def driver_free() -> int:
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    err, free, _total = driver.cuMemGetInfo()
    assert err == SUCCESS, err
    return int(free)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[DriverSpy]:
    """The spy for one test; afterwards nothing it saw is still reserved or held, and no memory leaked."""
    before = driver_free()
    watcher = DriverSpy()
    monkeypatch.setattr(cuda_backend, "driver", watcher)
    with validated_events():
        yield watcher
    gc.collect()
    assert not watcher.handles and not watcher.reservations, "a hostile call left memory or a reservation behind"
    monkeypatch.undo()
    assert driver_free() == before


def outcome(action: Callable[[], object]) -> object:
    try:
        return action()
    except (ArenaError, PoolSizingError) as refused:
        assert str(refused)
        return refused


@pytest.mark.parametrize(
    ("reserve", "granularity", "reason"),
    [
        (1 << 64, None, "is larger than"),
        (1 << 70, None, "is larger than"),
        (LIMIT + 2 * MiB, None, "is larger than"),
        (0, None, "must be at least 1"),
        (True, None, "not the bool"),
        (2.0 * MiB, None, "not float"),
        (1 << 30, 1 << 64, "granularity_bytes 18446744073709551616 is larger than"),
        (1 << 30, 3 * MiB, "not a multiple of the driver's minimum"),
        (1 << 30, -2 * MiB, "must be at least 1"),
        (1 << 30, True, "not the bool"),
    ],
)
def test_unaddressable_reservations_and_granularities_never_reach_the_driver(
    spy: DriverSpy, reserve: Any, granularity: Any, reason: str
) -> None:
    with pytest.raises(ArenaError, match=reason):
        VmmArena(CudaBackend(0, granularity_bytes=granularity), reserve)
    assert spy.calls == 0


@SETTINGS
@given(reserve=hostile, granularity=st.one_of(st.none(), hostile))
def test_hostile_cuda_reservations_either_work_or_are_refused(spy: DriverSpy, reserve: Any, granularity: Any) -> None:
    backend = outcome(lambda: CudaBackend(0, granularity_bytes=granularity))
    if isinstance(backend, CudaBackend):
        arena = outcome(lambda: VmmArena(backend, reserve))
        if isinstance(arena, VmmArena):
            arena.close()


@SETTINGS
@given(offset=hostile, nbytes=hostile, second=st.tuples(hostile, hostile))
def test_hostile_cuda_commits_decommits_and_views_keep_the_books_on_the_driver(
    spy: DriverSpy, offset: Any, nbytes: Any, second: tuple[Any, Any]
) -> None:
    with VmmArena.cuda(0, reserve_bytes=32 * MiB) as arena:
        for action in (
            lambda: arena.commit(offset, nbytes),
            lambda: arena.commit_many([(offset, nbytes), second]),
            lambda: arena.decommit(offset, nbytes),
            lambda: arena.decommit(*second, force=True),
        ):
            outcome(action)
            measured = arena.measure()
            assert measured is not None and measured.nbytes == arena.committed_bytes
        view = outcome(lambda: arena.tensor(offset, (nbytes,) if isinstance(nbytes, int) else (), torch.uint8))
        del view
        backend = arena.backend
        for call in (backend.map, backend.unmap, backend.release):
            outcome(lambda call=call: call(offset, nbytes))  # type: ignore[misc]
        gc.collect()
        arena.decommit(0, arena.reserved_va_bytes, force=True)


@SETTINGS
@given(tokens=hostile)
def test_hostile_token_counts_for_a_cuda_pool_are_refused_or_size_it(spy: DriverSpy, tokens: Any) -> None:
    shape = KVShape(layers=2, heads=2, head_dim=64, dtype=torch.bfloat16, page_size=16)
    pool = outcome(lambda: MHAKVPool.plan(shape, tokens, backend="cuda"))
    if isinstance(pool, MHAKVPool):
        pool.close()
