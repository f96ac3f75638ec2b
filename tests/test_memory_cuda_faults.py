"""The CUDA arena under injected driver faults: fail the Nth cuMemCreate, cuMemMap or cuMemSetAccess.

A real out-of-memory (tests/test_memory_cuda.py) fails the first cuMemCreate past free memory; it cannot
fail a chosen map or access grant in the middle of a range. Here the driver module seen by the
backend is a proxy that fails exactly the Nth call of one function with CUDA_ERROR_OUT_OF_MEMORY.
A scripted sequence of arena operations runs once per N until it completes without reaching N; after
every step the arena's books equal the driver's own free-memory delta, and once the arena is closed
the device has exactly as much free memory as before. Runs only on a GPU (``pytest -m cuda``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from memory_helpers import gpu_or_skip, validated_events

pytestmark = pytest.mark.cuda


torch, driver = gpu_or_skip()

from kvlog.memory import ArenaError, VmmArena, cuda_backend  # noqa: E402

FAILING_CALLS = ("cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease", "cuMemAddressFree")


class NthCallFails:
    """The driver module, except that the ``nth`` call (1-based) of ``call`` returns an error."""

    def __init__(self, call: str, nth: int) -> None:
        self._call = call
        self._nth = nth
        self.calls = 0
        self.fired = False

    def __getattr__(self, name: str) -> Any:
        function = getattr(driver, name)
        if name != self._call:
            return function

        def faulty(*args: Any) -> Any:
            self.calls += 1
            if self.calls != self._nth:
                return function(*args)
            self.fired = True
            failure = driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY
            return (failure, None) if name == "cuMemCreate" else (failure,)

        return faulty


def driver_free() -> int:
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    err, free, _total = driver.cuMemGetInfo()
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return int(free)


@pytest.fixture(scope="module", autouse=True)
def warm_cuda() -> None:
    """Create the context and load the kernels used below before any free-memory figure is taken."""
    probe = torch.zeros(1 << 20, dtype=torch.uint8, device="cuda")
    probe.fill_(1)
    int(probe.sum())
    torch.cuda.synchronize()


def scenario(box: list[VmmArena]) -> Iterator[str]:
    arena = VmmArena.cuda(0, reserve_bytes=1 << 30)
    box.append(arena)
    g = arena.granularity_bytes
    yield "reserve"
    arena.commit(0, 4 * g)
    yield "commit"
    arena.commit_many([(8 * g, 2 * g), (16 * g, 3 * g)])
    yield "commit_many"
    arena.commit(0, 20 * g)  # only the gaps are mapped
    yield "commit over gaps"
    arena.decommit(2 * g, 4 * g)
    yield "decommit"
    view = arena.tensor(0, (2 * g,), torch.uint8)
    view.fill_(3)
    arena.sleep()
    yield "sleep"
    arena.wake()
    yield "wake"
    del view
    arena.decommit(0, 20 * g)
    yield "decommit all"
    arena.close()
    yield "close"


def assert_exact(arena: VmmArena, free_before: int) -> None:
    if arena.closed:
        return
    measured = arena.measure()
    assert measured is not None
    assert arena.committed_bytes == measured.nbytes == free_before - driver_free()


@pytest.mark.parametrize("call", FAILING_CALLS)
def test_failing_the_nth_driver_call_keeps_the_books_equal_to_the_driver_and_frees_everything(
    call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    free_before = driver_free()
    fired = 0
    with validated_events():
        for nth in range(1, 100):
            proxy = NthCallFails(call, nth)
            monkeypatch.setattr(cuda_backend, "driver", proxy)
            box: list[VmmArena] = []
            steps = scenario(box)
            try:
                for _ in steps:
                    assert_exact(box[0], free_before)
            except ArenaError as refused:
                assert "CUDA_ERROR_OUT_OF_MEMORY" in str(refused)
            monkeypatch.undo()
            if box and not box[0].closed:
                assert_exact(box[0], free_before)
                if box[0].asleep:
                    box[0].wake()
                box[0].decommit(0, box[0].reserved_va_bytes, force=True)
                box[0].close()
            assert driver_free() == free_before, f"device memory leaked after failing {call} #{nth}"
            if not proxy.fired:
                break
            fired += 1
        else:
            pytest.fail(f"the scenario still reached {call} #{nth}")
    assert fired >= 1, f"the scenario never calls {call}"


def test_a_failed_rollback_leaves_an_arena_that_can_still_be_closed_without_leaking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cuMemSetAccess fails, then the rollback's cuMemUnmap fails too: the granules stay mapped.

    The backend keeps them on its books; the arena must still be able to give them back, and its
    committed_bytes must not claim less than the driver holds.
    """
    free_before = driver_free()
    with validated_events():
        arena = VmmArena.cuda(0, reserve_bytes=1 << 30)
        g = arena.granularity_bytes
        arena.commit(0, g)

        class Both(NthCallFails):
            def __getattr__(self, name: str) -> Any:
                if name == "cuMemUnmap":
                    return lambda *args: (driver.CUresult.CUDA_ERROR_UNKNOWN,)
                return super().__getattr__(name)

        monkeypatch.setattr(cuda_backend, "driver", Both("cuMemSetAccess", 1))
        with pytest.raises(ArenaError, match="cuMemSetAccess"):
            arena.commit(4 * g, 2 * g)
        monkeypatch.undo()
        measured = arena.measure()
        assert measured is not None
        held = free_before - driver_free()
        assert measured.nbytes == held
        assert arena.committed_bytes == held, "the arena's books disagree with what the driver holds"
        arena.decommit(0, arena.reserved_va_bytes, force=True)
        arena.close()
    assert driver_free() == free_before
