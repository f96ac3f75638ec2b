"""``SWAKVPool``: a hybrid sliding-window pool, a full-attention and a sliding-window MHA sub-pool.

Each sub-pool lives in its own arena and announces itself (label ``SWA`` first, then ``Full``, as
sglang prints them); ``kv_pool.swa_summary`` then totals both once. Summing the summary with the
sub-pool events double counts, which is why the summary says so in its schema.

Post-capture sizing keeps the sliding-window share of the upper bounds: for ``n`` full tokens the
window sub-pool gets ``n * swa_upper / full_upper`` (whole pages), and the budget covers both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvlog import events
from kvlog.emission import emit
from kvlog.memory.backend import BackendName
from kvlog.memory.closing import ClosesOnExit
from kvlog.memory.errors import PoolStateError
from kvlog.memory.pools import KVShape, MHAKVPool, sized_budget
from kvlog.memory.sizing import largest_fitting

if TYPE_CHECKING:
    from typing import Self


class SWAKVPool(ClosesOnExit):
    """Two MHA sub-pools, ``full`` and ``swa``, sized together."""

    def __init__(self, full: MHAKVPool, swa: MHAKVPool) -> None:
        """Join two sub-pools built with labels ``Full`` and ``SWA``; use ``allocate`` or ``plan``."""
        if (full.label, swa.label) != ("Full", "SWA"):
            raise ValueError("the sub-pools must be labelled Full and SWA")
        self.full = full
        self.swa = swa

    @classmethod
    def allocate(
        cls,
        full_shape: KVShape,
        swa_shape: KVShape,
        *,
        full_tokens: int,
        swa_tokens: int,
        backend: BackendName = "host",
        device: int = 0,
    ) -> Self:
        """Eager lifecycle: both sub-pools committed now, then the summary."""
        swa = MHAKVPool.allocate(swa_shape, num_tokens=swa_tokens, label="SWA", backend=backend, device=device)
        with swa.closed_on_failure():  # a refused Full sub-pool must not leave the SWA one reserved
            full = MHAKVPool.allocate(full_shape, num_tokens=full_tokens, label="Full", backend=backend, device=device)
        pool = cls(full, swa)
        pool.announce()
        return pool

    @classmethod
    def plan(
        cls,
        full_shape: KVShape,
        swa_shape: KVShape,
        *,
        full_upper_bound_tokens: int,
        swa_upper_bound_tokens: int,
        backend: BackendName = "host",
        device: int = 0,
    ) -> Self:
        """Post-capture lifecycle, first half: both sub-pools reserved for their upper bounds."""
        swa = MHAKVPool.plan(swa_shape, swa_upper_bound_tokens, label="SWA", backend=backend, device=device)
        with swa.closed_on_failure():  # a refused Full sub-pool must not leave the SWA one reserved
            full = MHAKVPool.plan(full_shape, full_upper_bound_tokens, label="Full", backend=backend, device=device)
        pool = cls(full, swa)
        pool.announce()
        return pool

    @property
    def committed_bytes(self) -> int:
        """Physical bytes of both sub-pools (separate arenas, so nothing is counted twice)."""
        return self.full.committed_bytes + self.swa.committed_bytes

    def swa_tokens_for(self, full_tokens: int) -> int:
        """The window sub-pool's share for ``full_tokens`` full-attention slots, in whole pages."""
        page = self.swa.shape.page_size
        share = full_tokens * self.swa.max_tokens // max(self.full.max_tokens, 1)
        return min(self.swa.max_tokens, share - share % page)

    def cost(self, full_tokens: int) -> int:
        """Bytes committed for ``full_tokens`` full slots and the matching window slots."""
        return self.full.cost(full_tokens) + self.swa.cost(self.swa_tokens_for(full_tokens))

    def finalize(
        self, budget_bytes: int | None = None, *, free_bytes: int | None = None, headroom_bytes: int = 0
    ) -> int:
        """Size both sub-pools from one budget (see ``KVPool.finalize``); return the full token count.

        All or nothing: if the second sub-pool cannot be backed, the first is shrunk back.
        """
        self.full.require_planned()
        self.swa.require_planned()
        free, budget = sized_budget(
            budget_bytes, free_bytes, headroom_bytes, free_now=self.full.free_bytes, committed=self.committed_bytes
        )
        full_tokens = largest_fitting(self.cost, budget, self.full.shape.page_size, self.full.max_tokens)
        swa_tokens = self.swa_tokens_for(full_tokens)
        self.swa.commit_tokens(swa_tokens)
        try:
            self.full.commit_tokens(full_tokens)
        except Exception:
            self.swa.revert_to_plan()
            raise
        emit(
            events.KvPoolPostCaptureSized(
                pool=type(self).__name__,
                label=None,
                dtype=str(self.full.shape.dtype),
                max_total_num_tokens=full_tokens,
                free_bytes=free,
                budget_bytes=budget,
                committed_bytes=self.committed_bytes,
            )
        )
        self.swa.announce()
        self.full.announce()
        self.announce()
        return full_tokens

    def announce(self) -> None:
        """``kv_pool.swa_summary``: K+V of both sub-pools, counted once."""
        if self.full.state != self.swa.state:
            raise PoolStateError("the Full and SWA sub-pools are in different lifecycle states")
        emit(
            events.KvPoolSwaSummary(
                allocation_state=self.full.state,
                total_bytes=sum(pool.shaped_bytes("") for pool in (self.full, self.swa)),
                swa_tokens=self.swa.num_tokens,
                full_tokens=self.full.num_tokens,
                committed_bytes=self.committed_bytes,
            )
        )

    def sleep(self) -> None:
        """Both sub-pools give back their memory, keeping their addresses."""
        self.swa.sleep()
        self.full.sleep()

    def wake(self) -> None:
        """Both sub-pools are backed again."""
        self.swa.wake()
        self.full.wake()

    def close(self) -> None:
        """Close both sub-pools (the second even if the first refuses)."""
        try:
            self.swa.close()
        finally:
            self.full.close()
