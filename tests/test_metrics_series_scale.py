"""MemorySeries at scale: what one event costs does not grow with the series of other servers and ranks.

A follower feeds one ``MemorySeries`` the logs of many servers; the work an event does is counted here
as the comparisons of ``server_instance`` names it makes, a name type that counts them standing in for
the log paths (each series carries its server's). Looking a run up by its name compares it with its own
name at most; walking the series, as a restart and a pool's allocation did, compares it with every one.
"""

from __future__ import annotations

from typing import Any

from kvlog.metrics import MemorySeries

RANKS = 8


class Name(str):
    """A ``server_instance`` that counts how often it is compared with another name."""

    __slots__ = ()
    compared = 0

    def __eq__(self, other: object) -> bool:
        Name.compared += 1
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = str.__hash__


def start(tp: int) -> list[dict[str, Any]]:
    """A rank's start-up: weights, a named target pool and an unnamed draft pool, post-capture sizing."""
    ranks = {"tp": tp}
    return [
        {"event": "weights.load_begin", "ranks": ranks, "avail_bytes": 100},
        {"event": "weights.load_end", "ranks": ranks, "mem_usage_bytes": 10, "avail_bytes": 90},
        {"event": "kv_pool.allocation", "ranks": ranks, "pool": "MHATokenToKVPool", "label": None,
         "allocation_state": "allocated", "kv_bytes": 50, "num_tokens": 5},
        {"event": "kv_pool.allocation", "ranks": ranks, "pool": None, "label": None,
         "allocation_state": "allocated", "kv_bytes": 5, "num_tokens": 1},
        {"event": "kv_pool.post_capture_sized", "ranks": ranks, "committed_bytes": 50, "budget_bytes": 60},
    ]  # fmt: skip


def comparisons_for_one_more_server(servers: int) -> int:
    """Names compared while a new server starts its ranks, with ``servers`` others' series already there."""
    series = MemorySeries()
    for n in range(servers):
        name = Name(f"logs/server-{n}.log")
        for tp in range(RANKS):
            for event in start(tp):
                series.observe(event, instance=name)
    Name.compared = 0
    name = Name("logs/new.log")
    for tp in range(RANKS):
        for event in start(tp):
            series.observe(event, instance=name)
    return Name.compared


def test_a_restart_and_an_allocation_cost_the_same_with_ten_or_a_hundred_other_servers() -> None:
    few, many = comparisons_for_one_more_server(10), comparisons_for_one_more_server(100)
    assert few == many  # 1fdc331: 2,000 with 10 servers, 20,000 with 100 (every series walked)
    assert many <= 5 * RANKS * len(start(0))  # a look-up or two an update, not a walk
