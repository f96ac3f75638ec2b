"""Metrics cost per event against the series already there (issue 35): ``MemorySeries.observe``.

A follower of many logs feeds one ``MemorySeries``. This fills one with ``--series`` series (servers
of 8 ranks, each rank's start-up: weights, free memory, a target and a draft pool, post-capture
sizing), then times the events of one rank restarting again and again (``weights.load_begin``, two
``kv_pool.allocation``, ``kv_pool.post_capture_sized``, ``weights.load_end``), which keeps the series
count where it is, and reports microseconds per event, median of ``--repeat`` rounds.

Each tree runs in its own process (``PYTHONPATH``), taking turns: this one and, with ``--baseline TREE``
(a checkout of the commit before, e.g. ``git archive 1fdc331 | tar -x -C /tmp/base``), that one; the
ratio is the baseline's time over this tree's.

Usage: ``.venv/bin/python benchmarks/bench_metrics.py [--series 100,1000,10000] [--baseline TREE]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RANKS = 8


def start(tp: int) -> list[dict[str, Any]]:
    ranks = {"tp": tp}
    pool = {"event": "kv_pool.allocation", "ranks": ranks, "allocation_state": "allocated", "num_tokens": 5}
    return [
        {"event": "weights.load_begin", "ranks": ranks, "avail_bytes": 100},
        {"event": "weights.load_end", "ranks": ranks, "mem_usage_bytes": 10, "avail_bytes": 90},
        pool | {"pool": "MHATokenToKVPool", "kv_bytes": 50},
        pool | {"pool": None, "label": None, "kv_bytes": 5},
        {"event": "kv_pool.post_capture_sized", "ranks": ranks, "committed_bytes": 50, "budget_bytes": 60},
    ]


def worker(series_count: int, rounds: int, events: int) -> float:
    """Microseconds per event with ``series_count`` series there (the tree on ``sys.path``'s)."""
    from kvlog.metrics import MemorySeries  # noqa: PLC0415 - the tree PYTHONPATH names

    series = MemorySeries()
    server = 0
    while len(series.samples()) < series_count:
        for tp in range(RANKS):
            for event in start(tp):
                series.observe(event, instance=f"logs/server-{server}.log")
        server += 1
    restart = start(0)
    times = []
    for _ in range(rounds):
        began = time.perf_counter()
        for n in range(events // len(restart)):
            for event in restart:
                series.observe(event, instance=f"logs/server-{n % server}.log")
        times.append((time.perf_counter() - began) / (events // len(restart) * len(restart)))
    return statistics.median(times) * 1e6


def run(tree: Path, series_count: int, rounds: int, events: int) -> float:
    done = subprocess.run(
        [sys.executable, __file__, "--worker", str(series_count), "--repeat", str(rounds), "--events", str(events)],
        env={**os.environ, "PYTHONPATH": str(tree)},
        check=True,
        capture_output=True,
        text=True,
    )
    return float(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--series", default="100,1000,10000")
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--worker", type=int)
    args = parser.parse_args()
    if args.worker is not None:
        print(worker(args.worker, args.repeat, args.events))
        return
    print("| series there | this tree µs/event | baseline µs/event | baseline / this |")
    print("| ---: | ---: | ---: | ---: |")
    for count in map(int, args.series.split(",")):
        this = run(ROOT, count, args.repeat, args.events)
        base = run(args.baseline, count, args.repeat, args.events) if args.baseline else None
        ratio = f"{base / this:.1f}x" if base else ""
        print(f"| {count:,} | {this:.2f} | {'' if base is None else f'{base:.1f}'} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
