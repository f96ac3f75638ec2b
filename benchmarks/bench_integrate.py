"""The cost of ``kvlog integrate`` to a server: records per CPU second with and without kvlog's handler.

The baseline is sglang's default logging (``configure_logger``: ``basicConfig`` with
``[%(asctime)s TP0] %(message)s``) writing to a file. The contender is the same plus kvlog's
``EventHandler`` on the root logger, as the configuration of ``kvlog integrate sglang`` installs it,
writing events to a file. The mix is what a serving scheduler logs: mostly decode and prefill batch
lines, and one start-up's memory lines (from ``tests/corpus/gen2_2025.log``) every ``--every`` records.
The time counted is the process's CPU time (every thread: the handler's worker too), from after a
start-up (one cycle of the mix, untimed; the handler loads the migrations when it is made, once per
process, about 0.15 s) until the handler has written every event and closed. Each contender runs in a fresh process
(logging's state is global), alternating, best of ``--repeat``, each after the machine goes idle.
``--baseline TREE`` adds kvlog's handler from another source tree (a checkout of the commit before a
change) in the same rounds: each process runs with ``PYTHONSAFEPATH`` and that tree on ``PYTHONPATH``
(``python -c`` would otherwise put the working directory first on the path, and import its kvlog for
both trees).

Usage: ``.venv/bin/python benchmarks/bench_integrate.py [--records N] [--every K] [--repeat R] [--baseline TREE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from quiet import wait_for_idle

from kvlog.text.prefix import SGLANG

TREE = Path(__file__).resolve().parent.parent
CORPUS = TREE / "tests" / "corpus" / "gen2_2025.log"
REQUEST_LINES = (
    "Decode batch. #running-req: 12, #token: 3456, token usage: 0.05, cuda graph: True, "
    "gen throughput (token/s): 1234.56, #queue-req: 0",
    "Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 0, token usage: 0.01, #running-req: 0, #queue-req: 0",
)

RUN = """
import json, logging, sys, time
records, events, with_kvlog = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3] == "1"
logging.basicConfig(level=logging.INFO, format="[%(asctime)s TP0] %(message)s", datefmt="%Y-%m-%d %H:%M:%S",
                    filename=sys.argv[4], force=True)
from kvlog.integrate.handler import EventHandler  # imported by both: a server's heap holds far more anyway
from kvlog.integrate.servers import SGLANG
from kvlog.migration.engine import Migrator
if with_kvlog:
    handler = EventHandler(SGLANG, events, ranks={"tp": 0})
    logging.getLogger().addHandler(handler)
logger = logging.getLogger("sglang.srt.managers.scheduler")
warm = int(sys.argv[5])
for message in records[:warm]:  # the server's start-up: the handler's worker starts then
    logger.info(message)
time.sleep(1.0)
start = time.process_time()
for message in records[warm:]:
    logger.info(message)
logging.shutdown()
print(time.process_time() - start)
"""

#: what the handler costs the server's thread for a record no probe matches (``handle``, as logging calls it)
PASSING = """
import logging, os, sys, timeit
from kvlog.integrate.handler import EventHandler
from kvlog.integrate.servers import SGLANG
handler = EventHandler(SGLANG, os.devnull, ranks={"tp": 0})
record = logging.LogRecord("sglang.srt.managers.scheduler", logging.INFO, "bench", 1, sys.argv[1], (), None)
rounds = 1_000_000
print(min(timeit.repeat(lambda: handler.handle(record), number=rounds, repeat=5)) / rounds)
handler.close()
"""


def tree_env(tree: Path) -> dict[str, str]:
    """The environment that imports kvlog from ``tree`` and from nowhere else (not the working directory)."""
    return os.environ | {"PYTHONSAFEPATH": "1", "PYTHONPATH": str(tree)}


def mix(records: int, every: int) -> list[str]:
    """``records`` messages: request lines, and a start-up's memory lines every ``every`` records (0: none)."""
    memory = [SGLANG.split(line).message for line in CORPUS.read_text().splitlines()]
    if not every:
        return [REQUEST_LINES[i % 2] for i in range(records)]
    out: list[str] = []
    while len(out) < records:
        out += [REQUEST_LINES[i % 2] for i in range(every - len(memory))] + memory
    return out[:records]


def run(records_json: Path, events: Path, tmp: Path, with_kvlog: bool, warm: int, tree: Path) -> float:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            RUN,
            str(records_json),
            str(events),
            "1" if with_kvlog else "0",
            str(tmp / "server.log"),
            str(warm),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=tree_env(tree),
    )
    return float(done.stdout)


def passing_cost(tree: Path) -> float:
    """Seconds the handler of ``tree`` costs the server's thread for a record no probe matches."""
    wait_for_idle()
    command = [sys.executable, "-c", PASSING, REQUEST_LINES[0]]
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=tree_env(tree))
    return float(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument(
        "--every", type=int, default=2_000, help="one start-up's memory lines every K records (0: none at all)"
    )
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--baseline", type=Path, metavar="TREE", help="also time the handler of this source tree")
    args = parser.parse_args()
    warm = args.every or 1_000  # the first cycle is the untimed start-up
    records = mix(args.records + warm, args.every)
    memory_share = sum(1 for m in records[warm:] if m not in REQUEST_LINES) / args.records
    #: contender: (tree, with kvlog's handler)
    contenders = {"plain": (TREE, False), "kvlog": (TREE, True)}
    if args.baseline is not None:
        contenders["baseline"] = (args.baseline.resolve(), True)
    best = dict.fromkeys(contenders, float("inf"))
    with tempfile.TemporaryDirectory(prefix="kvlog-bench-") as name:
        tmp = Path(name)
        records_json = tmp / "records.json"
        records_json.write_text(json.dumps(records))
        for _ in range(args.repeat):
            for contender, (tree, with_kvlog) in contenders.items():
                wait_for_idle()
                seconds = run(records_json, tmp / f"{contender}.jsonl", tmp, with_kvlog, warm, tree)
                best[contender] = min(best[contender], seconds)
        written = {c: tmp / f"{c}.jsonl" for c in contenders if contenders[c][1]}
        events = {c: len(p.read_bytes().splitlines()) // args.repeat if p.exists() else 0 for c, p in written.items()}
    if len(set(events.values())) > 1:
        raise SystemExit(f"the trees wrote other numbers of events ({events}): the figures would compare other work")
    rate = {k: args.records / v for k, v in best.items()}
    print(f"{args.records} records, {memory_share:.2%} memory lines, {events['kvlog']} events per run (with start-up);")
    print(f"best of {args.repeat}")
    print(f"  sglang's default logging:            {rate['plain']:>12,.0f} records/s")
    print(f"  the same plus kvlog's handler:       {rate['kvlog']:>12,.0f} records/s")
    print(f"  kvlog's handler costs {best['kvlog'] / best['plain'] - 1:+.1%} CPU time")
    passing = passing_cost(TREE)
    print(f"  a record no probe matches costs the server's thread {passing * 1e9:.0f} ns in the handler")
    if args.baseline is not None:
        print(f"  the baseline's handler ({args.baseline}):   {rate['baseline']:>12,.0f} records/s")
        print(f"  the baseline's handler costs {best['baseline'] / best['plain'] - 1:+.1%} CPU time")
        handler, handler_before = best["kvlog"] - best["plain"], best["baseline"] - best["plain"]
        print(f"  CPU time, this tree / baseline: {best['kvlog'] / best['baseline']:.3f}x in all, ", end="")
        print(f"{handler / handler_before:.3f}x the handler's own (beyond plain logging)")
        passing_before = passing_cost(args.baseline.resolve())
        print(f"  a record no probe matches, baseline: {passing_before * 1e9:.0f} ns ({passing / passing_before:.3f}x)")


if __name__ == "__main__":
    main()
