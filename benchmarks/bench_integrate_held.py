"""What kvlog's logging handler holds in a server process under a flood: peak bytes against its budget.

A pool has been read and waits for its post-capture line (``--hold`` an hour), so every record read
after it is held by the look-ahead; then the server's thread logs a flood as fast as it can, each record
a fresh string as a server's are: request lines the probe passes (8 KB each), memory lines that are
events (each held behind the pool), or configuration dumps of 1 MB on one line. Reported per budget:
the most the handler's own accounting held (``Budget.peak``), the most ``tracemalloc`` saw allocated
above the process before the flood (the handler, its worker and the engine, transient copies
included), the records dropped, and the events written. The baseline (``--before TREE``, a checkout
of 1fdc331) is the handler before the budget: only the queue's count bound; ``--baseline TREE`` (a
checkout with the budget, the commit before a change) runs that tree's handler at each budget beside
this one's. Each run is a fresh process (``tracemalloc`` and logging are global), in the tree it
measures, after the machine goes idle.

Usage: ``.venv/bin/python benchmarks/bench_integrate_held.py [--budget MIB ...] [--before TREE] [--baseline TREE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from quiet import wait_for_idle

TREE = Path(__file__).resolve().parent.parent

#: kind: (records, what each says)
FLOODS = {
    "request lines, 8 KB": (10_000, "Scheduler step. KV cache hit rate: 0.5, "),
    "memory events, 100 B": (
        20_000,
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: {i}, K size: 0.46 GB, V size: 0.46 GB",
    ),
    "dumps, 1 MB on one line": (100, "Using config: "),
}
PAD = {"request lines, 8 KB": 8_000, "memory events, 100 B": 0, "dumps, 1 MB on one line": 1 << 20}

RUN = """
import gc, json, logging, sys, tempfile, time, tracemalloc
from pathlib import Path
from kvlog.integrate.handler import EventHandler
from kvlog.integrate.servers import SGLANG
from kvlog.text.prefix import SGLANG as PREFIX
budget, records, text, pad = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
corpus = Path("tests/corpus/postcapture_before_fix_2026_07.log").read_text().splitlines()[:12]
start_up = [PREFIX.split(line).message for line in corpus if " TP0]" in line]
pool = 1 + next(i for i, message in enumerate(start_up) if message.startswith("KV Cache is allocated"))
with tempfile.TemporaryDirectory() as tmp:
    bounded = {"max_held_bytes": budget} if budget else {}  # 0: the handler of a tree without the budget
    handler = EventHandler(SGLANG, f"{tmp}/kv.jsonl", ranks={"tp": 0}, hold_s=3600.0, **bounded)
    logger = logging.getLogger("sglang.srt")
    logger.propagate, logger.level = False, logging.INFO
    logger.addHandler(handler)
    for message in start_up[:pool]:  # the pool, waiting for its post-capture line
        logger.info(message)
    time.sleep(0.5)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(records):
        logger.info(text.format(i=i) + "x" * pad + (f" {i}" if pad else ""))
    while not handler._queue.empty():
        time.sleep(0.05)
    time.sleep(0.5)
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    handler.close()
    held = handler.budget.peak if budget else -1
    print(json.dumps({"peak": held, "traced": peak, "dropped": handler.dropped, "written": handler.written}))
"""


def run(budget: int, records: int, text: str, pad: int, tree: Path = TREE) -> dict[str, int]:
    wait_for_idle()
    env = os.environ | {"PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(budget), str(records), text, str(pad)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=tree,  # python -c puts the working directory first on the path: there, the tree's kvlog
    )
    result: dict[str, int] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, nargs="*", default=[64, 8], metavar="MIB")
    parser.add_argument(
        "--before", type=Path, metavar="TREE", help="a checkout without the budget (git archive 1fdc331)"
    )
    parser.add_argument("--baseline", type=Path, metavar="TREE", help="a checkout with the budget, run at each budget")
    args = parser.parse_args()
    mib = 1 << 20
    print("| flood | records | tree | budget | held (accounting) | allocated (tracemalloc) | dropped | events |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    trees = [("this", TREE), *([("baseline", args.baseline.resolve())] if args.baseline is not None else [])]
    for kind, (records, text) in FLOODS.items():
        contenders = [("before", 0, args.before.resolve())] if args.before is not None else []
        contenders += [(name, budget, tree) for budget in args.budget for name, tree in trees]
        for name, budget, tree in contenders:
            got = run(budget * mib, records, text, PAD[kind], tree)
            named = "none (count only)" if not budget else f"{budget} MiB"
            held = f"{got['peak'] / mib:.1f} MiB" if got["peak"] >= 0 else "-"
            print(
                f"| {kind} | {records:,} | {name} | {named} | {held} | {got['traced'] / mib:.1f} MiB "
                f"| {got['dropped']:,} | {got['written']:,} |"
            )


if __name__ == "__main__":
    main()
