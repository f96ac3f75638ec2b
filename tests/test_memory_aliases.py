"""Anything that shares a view's storage keeps the arena's bytes in use (issue 9, item 15).

Before the fix the arena held a weak reference to the tensor object ``tensor()`` returned:
``keep = view.detach(); del view`` let ``decommit`` and ``close`` through, and reading ``keep`` then
faulted. Every way of keeping the storage alive without the original tensor object is tried here,
on the host backend and (``-m cuda``, on the GPU machine) on the CUDA backend: each must make
``decommit`` and ``close`` refuse with an ``ArenaError`` naming the view's byte range, and both must
go through once the last reference is gone.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from memory_helpers import gpu_or_skip, validated_events

from kvlog.memory import ArenaError, VmmArena

ELEMENTS = 1024  # a float32 view of 4 KiB at offset 0: the refusal names [0, 4096)
VIEW_RANGE = r"\[0, 4096\)"


def in_closure(view: torch.Tensor) -> Callable[[], torch.Tensor]:
    """A function that reads the view later: the closure cell keeps it."""

    def read() -> torch.Tensor:
        return view.sum()

    return read


ALIASES: dict[str, Callable[[torch.Tensor], Any]] = {
    "detach": lambda view: view.detach(),
    "view": lambda view: view.view(32, 32),
    "as_strided": lambda view: view.as_strided((16,), (2,), 64),
    "set_": lambda view: torch.empty(0, device=view.device).set_(view.untyped_storage()),
    "untyped_storage": lambda view: view.untyped_storage(),
    "from_dlpack": torch.from_dlpack,
    "numpy": lambda view: view.numpy(),
    "slice": lambda view: view[512:],
    "reshape": lambda view: view.reshape(-1, 2),
    "view_as_dtype": lambda view: view.view(torch.uint8),
    "list": lambda view: [view],
    "closure": in_closure,
}


@pytest.fixture(params=["host", pytest.param("cuda", marks=pytest.mark.cuda)])
def arena(request: pytest.FixtureRequest) -> Iterator[VmmArena]:
    """A 1 MiB arena with its first granule committed, on each backend."""
    if request.param == "cuda":
        gpu_or_skip()
        made = VmmArena.cuda(0, reserve_bytes=8 << 20)
    else:
        made = VmmArena.host(1 << 20)
    with validated_events():
        made.commit(0, 1)
        yield made
        gc.collect()
        if not made.closed:
            made.close()


def blocks_until_released(arena: VmmArena, keep: list[Any]) -> None:
    """With ``keep`` holding the only reference, decommit and close refuse; after it goes, both work."""
    gc.collect()
    granule = arena.granularity_bytes
    with pytest.raises(ArenaError, match=VIEW_RANGE):
        arena.decommit(0, granule)
    with pytest.raises(ArenaError, match=VIEW_RANGE):
        arena.close()
    assert arena.committed_bytes == granule and not arena.closed
    keep.clear()
    gc.collect()
    arena.decommit(0, granule)
    arena.close()
    assert arena.closed


@pytest.mark.parametrize("alias", ALIASES)
def test_an_alias_of_a_view_blocks_decommit_and_close_until_it_goes(arena: VmmArena, alias: str) -> None:
    if alias == "numpy":
        if arena.backend.name != "host":
            pytest.skip("numpy() is for CPU tensors")
        pytest.importorskip("numpy")
    view = arena.tensor(0, (ELEMENTS,), torch.float32)
    view.fill_(2.0)
    keep = [ALIASES[alias](view)]
    del view
    gc.collect()
    blocked = False
    try:
        arena.decommit(0, arena.granularity_bytes)
    except ArenaError:
        blocked = True
    assert blocked, f"decommit went through under a live {alias} alias"
    held = keep[0]
    if isinstance(held, torch.Tensor):
        assert float(held.float().sum()) > 0, "the alias no longer reads the arena's bytes"
    del held
    blocks_until_released(arena, keep)


def test_an_alias_held_by_another_thread_blocks_until_that_thread_drops_it(arena: VmmArena) -> None:
    made, drop, dropped = threading.Event(), threading.Event(), threading.Event()

    def worker() -> None:
        view = arena.tensor(0, (ELEMENTS,), torch.float32)
        kept = view.detach()
        del view
        made.set()
        drop.wait(timeout=30)
        del kept
        dropped.set()

    thread = threading.Thread(target=worker)
    thread.start()
    assert made.wait(timeout=30)
    gc.collect()
    with pytest.raises(ArenaError, match=VIEW_RANGE):
        arena.decommit(0, arena.granularity_bytes)
    with pytest.raises(ArenaError, match=VIEW_RANGE):
        arena.close()
    drop.set()
    assert dropped.wait(timeout=30)
    thread.join(timeout=30)
    gc.collect()
    arena.decommit(0, arena.granularity_bytes)
    arena.close()


def test_an_alias_only_a_reference_cycle_keeps_is_not_in_use(arena: VmmArena) -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    cycle.append(arena.tensor(0, (ELEMENTS,), torch.float32).detach())
    del cycle
    arena.close()  # close collects cycles before it counts the views
    assert arena.closed


def test_views_in_other_ranges_do_not_block_a_decommit_and_many_dead_views_are_forgotten(arena: VmmArena) -> None:
    granule = arena.granularity_bytes
    arena.commit(granule, granule)
    far = arena.tensor(granule, (ELEMENTS,), torch.float32).detach()
    for _ in range(1000):
        arena.tensor(0, (ELEMENTS,), torch.float32).detach()
    gc.collect()
    arena.decommit(0, granule)
    assert len(arena._views) == 1  # the books hold the one live storage, not a thousand dead ones
    with pytest.raises(ArenaError, match=rf"\[{granule}, {granule + 4096}\)"):
        arena.close()
    del far
    gc.collect()
    arena.decommit(granule, granule)
