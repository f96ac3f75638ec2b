"""``kvlog follow`` on a server older than post-capture sizing: its start-up is not held for the hold bound.

Such a server prints ``KV Cache is allocated`` for real allocations and never a ``Post-capture KV sizing``
line; the scheduler's limits line, printed after every post-capture line of a rank's start-up, ends the wait
on its rank, and the main process's ready line, printed once every rank's scheduler is ready, on every rank.
"""

from __future__ import annotations

from pathlib import Path

import orjson
from follow_helpers import following, migrated

#: sglang 0.5.10's wording, one rank (tensor parallelism 1)
START_UP = """\
[2026-03-02 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=1)
[2026-03-02 10:00:20 TP0] Load weight begin. avail mem=78.50 GB
[2026-03-02 10:00:31 TP0] KV Cache is allocated. #tokens: 470000, K size: 32.27 GB, V size: 32.27 GB
[2026-03-02 10:00:31 TP0] Memory pool end. avail mem=12.53 GB
[2026-03-02 10:00:40 TP0] max_total_num_tokens=470000, chunked_prefill_size=8192, max_prefill_tokens=16384, \
max_running_requests=4096, context_len=40960, available_gpu_mem=11.90 GB
"""


def test_the_pool_is_written_at_the_end_of_start_up_not_after_the_hold(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text(START_UP)
    with following(str(log), out, hold_s=3600) as run:
        events = run.wait_events(4)  # an hour's hold would time this wait out, were the pool still waiting
    pool = orjson.loads(events[1])
    assert (pool["event"], pool["allocation_state"]) == ("kv_pool.allocation", "allocated")
    assert pool["migrated"]["inferred"]["allocation_state"]["rule"] == "v1-claims-allocated"
    assert events == migrated(log)


#: the same server on four GPUs: since 0.4.6.post4 only TP rank 0 prints the limits line; the main process then
#: prints the ready line, once every rank's scheduler is ready
FOUR_RANKS = (
    "[2026-03-02 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen3-32B', tp_size=4)\n"
    + "".join(
        f"[2026-03-02 10:00:31 TP{rank}] KV Cache is allocated. #tokens: 470000, K size: 8.07 GB, V size: 8.07 GB\n"
        for rank in (1, 0, 3, 2)
    )
    + "[2026-03-02 10:00:40 TP0] max_total_num_tokens=470000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=4096, context_len=40960, available_gpu_mem=11.90 GB\n"
)
READY = "[2026-03-02 10:01:02] The server is fired up and ready to roll!\n"


def test_every_rank_is_written_at_the_ready_line_not_after_the_hold(tmp_path: Path) -> None:
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text(FOUR_RANKS + READY)
    with following(str(log), out, hold_s=3600) as run:
        events = run.wait_events(5)  # an hour's hold would time this wait out, were TP1's pool still waiting
    pools = [orjson.loads(line) for line in events[:4]]
    assert [pool["ranks"]["tp"] for pool in pools] == [1, 0, 3, 2]
    assert {pool["migrated"]["inferred"]["allocation_state"]["rule"] for pool in pools} == {"v1-claims-allocated"}
    assert events == migrated(log)


def test_without_the_ready_line_the_other_ranks_wait_for_the_hold(tmp_path: Path) -> None:
    """Warmup failed: nothing ends TP1's wait but the hold, which the event then cites."""
    log, out = tmp_path / "server.log", tmp_path / "events.jsonl"
    log.write_text(FOUR_RANKS)
    with following(str(log), out, hold_s=0.5) as run:
        pools = [orjson.loads(line) for line in run.wait_events(5)[:4]]
    rules = {pool["ranks"]["tp"]: pool["migrated"]["inferred"]["allocation_state"]["rule"] for pool in pools}
    assert rules == {
        1: "look-ahead-exhausted",
        0: "v1-claims-allocated",
        3: "look-ahead-exhausted",
        2: "look-ahead-exhausted",
    }
