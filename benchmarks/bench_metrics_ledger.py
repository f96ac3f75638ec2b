"""What the ledger's gauges cost (issue 33 item 4): ``MemorySeries.observe`` and a scrape, with and without them.

A follower of a TP8 server (``--ranks``) feeds one ``MemorySeries`` each rank's real start-up (the corpus
log ``postcapture_before_fix_2026_07.log`` migrated: load, arena, pools, capture, post-capture sizing),
then a memory runtime's commits (``--commits`` per rank). This times, in one process and taking turns,
the series without a ledger (the baseline: what ``MemorySeries()`` did before) and with
``LedgerFigures``: microseconds per event observed, and milliseconds per scrape (``samples()``) after
every rank's events changed (each run's ledger worked out again), median of ``--repeat`` rounds.

Usage: ``.venv/bin/python benchmarks/bench_metrics_ledger.py [--ranks 8] [--commits 1000] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import time
from pathlib import Path
from typing import Any

from kvlog.commands import migrate
from kvlog.metrics import LedgerFigures, MemorySeries

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "tests" / "corpus" / "postcapture_before_fix_2026_07.log"


def start_up(ranks: int) -> list[dict[str, Any]]:
    """The log's first run (TP0's lines), once per rank."""
    out = io.BytesIO()
    migrate(str(LOG), only_events=True, stdout=out)
    first = [json.loads(line) for line in out.getvalue().splitlines()]
    first = [event for event in first if event.get("ranks") == {"tp": 0}][:8]
    return [event | {"ranks": {"tp": tp}} for tp in range(ranks) for event in first]


def commits(ranks: int, count: int) -> list[dict[str, Any]]:
    base = {"event": "kv_arena.commit", "schema_version": 1, "level": "info", "pid": 7, "arena_id": "0"}
    base |= {"timestamp": "2026-07-21T09:05:00Z", "range_count": 1, "offset_bytes": 0, "nbytes": 2 << 20}
    base |= {"measured_committed_bytes": None, "duration_us": 3.0}
    return [base | {"ranks": {"tp": tp}, "committed_bytes": n << 21} for n in range(count) for tp in range(ranks)]


def measure(ledger: bool, events: list[dict[str, Any]], ranks: int) -> tuple[float, float]:
    """(µs per event observed, ms per scrape after every rank changed)."""
    series = MemorySeries(ledger=LedgerFigures() if ledger else None)
    began = time.perf_counter()
    for event in events:
        series.observe(event, instance="server.log")
    observed = (time.perf_counter() - began) / len(events) * 1e6
    scrapes = []
    [commit] = commits(1, 1)
    for round_ in range(3):
        for tp in range(ranks):  # a new commit on every rank: each run's ledger is stale
            series.observe(commit | {"ranks": {"tp": tp}, "committed_bytes": (round_ + 1) << 30}, instance="server.log")
        began = time.perf_counter()
        series.samples()
        scrapes.append((time.perf_counter() - began) * 1e3)
    return observed, statistics.median(scrapes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    events = start_up(args.ranks) + commits(args.ranks, args.commits)
    rounds: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(args.repeat):
        for ledger in (False, True):
            rounds[ledger].append(measure(ledger, events, args.ranks))
    base, this = ({i: statistics.median(x[i] for x in rounds[key]) for i in (0, 1)} for key in (False, True))
    print(f"{len(events):,} events, {args.ranks} ranks, {args.commits:,} commits a rank")
    print("| | without ledger | with ledger | with / without |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| µs per event observed | {base[0]:.1f} | {this[0]:.1f} | {this[0] / base[0]:.2f}× |")
    print(f"| ms per scrape, every rank changed | {base[1]:.2f} | {this[1]:.2f} | {this[1] / base[1]:.1f}× |")


if __name__ == "__main__":
    main()
