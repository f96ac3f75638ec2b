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

Usage: ``.venv/bin/python benchmarks/bench_integrate.py [--records N] [--every K] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

from quiet import wait_for_idle

from kvlog.integrate.handler import EventHandler
from kvlog.integrate.servers import SGLANG as SGLANG_SERVER
from kvlog.text.prefix import SGLANG

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus" / "gen2_2025.log"
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


def mix(records: int, every: int) -> list[str]:
    """``records`` messages: request lines, and a start-up's memory lines every ``every`` records (0: none)."""
    memory = [SGLANG.split(line).message for line in CORPUS.read_text().splitlines()]
    if not every:
        return [REQUEST_LINES[i % 2] for i in range(records)]
    out: list[str] = []
    while len(out) < records:
        out += [REQUEST_LINES[i % 2] for i in range(every - len(memory))] + memory
    return out[:records]


def run(records_json: Path, tmp: Path, with_kvlog: bool, warm: int) -> float:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            RUN,
            str(records_json),
            str(tmp / "events.jsonl"),
            "1" if with_kvlog else "0",
            str(tmp / "server.log"),
            str(warm),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout)


def passing_cost() -> float:
    """Seconds the handler costs the server's thread for a record no probe matches (``handle``, as logging calls it)."""
    handler = EventHandler(SGLANG_SERVER, os.devnull, ranks={"tp": 0})
    record = logging.LogRecord("sglang.srt.managers.scheduler", logging.INFO, __file__, 1, REQUEST_LINES[0], (), None)
    rounds = 1_000_000
    best = min(timeit.repeat(lambda: handler.handle(record), number=rounds, repeat=5)) / rounds
    handler.close()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument(
        "--every", type=int, default=2_000, help="one start-up's memory lines every K records (0: none at all)"
    )
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    warm = args.every or 1_000  # the first cycle is the untimed start-up
    records = mix(args.records + warm, args.every)
    memory_share = sum(1 for m in records[warm:] if m not in REQUEST_LINES) / args.records
    best = {False: float("inf"), True: float("inf")}
    with tempfile.TemporaryDirectory(prefix="kvlog-bench-") as name:
        tmp = Path(name)
        records_json = tmp / "records.json"
        records_json.write_text(json.dumps(records))
        for _ in range(args.repeat):
            for with_kvlog in (False, True):
                wait_for_idle()
                best[with_kvlog] = min(best[with_kvlog], run(records_json, tmp, with_kvlog, warm))
        written = tmp / "events.jsonl"
        events = len(written.read_bytes().splitlines()) // args.repeat if written.exists() else 0  # with start-up
    rate = {k: args.records / v for k, v in best.items()}
    print(f"{args.records} records, {memory_share:.2%} memory lines, {events} events per run; best of {args.repeat}")
    print(f"  sglang's default logging:            {rate[False]:>12,.0f} records/s")
    print(f"  the same plus kvlog's handler:       {rate[True]:>12,.0f} records/s")
    print(f"  kvlog's handler costs {best[True] / best[False] - 1:+.1%} CPU time")
    print(f"  a record no probe matches costs the server's thread {passing_cost() * 1e9:.0f} ns in the handler")


if __name__ == "__main__":
    main()
