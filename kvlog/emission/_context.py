"""The parallelism ranks a context tags its events with.

They live in one context variable rather than structlog's contextvars, so reading them costs one
lookup and no other context can leak fields into a schema-checked event.
"""

from __future__ import annotations

from contextvars import ContextVar

bound_ranks: ContextVar[dict[str, int] | None] = ContextVar("kvlog_ranks", default=None)


def bind_ranks(**ranks: int) -> None:
    """Tag every event this context emits with its parallelism ranks, e.g. ``bind_ranks(tp=0, dp=1)``.

    Each call replaces the ranks of the current context (thread or asyncio task); ``bind_ranks()``
    with none clears them.
    """
    bound_ranks.set({tag.lower(): rank for tag, rank in ranks.items()} or None)
