"""The cost of ``kvlog integrate`` to a server: records per CPU second with and without kvlog's handler.

The baseline is sglang's default logging (``configure_logger``: ``basicConfig`` with
``[%(asctime)s TP0] %(message)s``) writing to a file. The contender is the same plus kvlog's
``EventHandler`` on the root logger, as the configuration of ``kvlog integrate sglang`` installs it,
writing events to a file, with the native probe (``kvlog._native``, where built) and, as ``python``,
with ``KVLOG_NATIVE=0``. The time counted is the process's CPU time (every thread: the handler's worker
too), from after a start-up (one cycle of the mix, untimed; the handler loads the migrations when it is
made, once per process, about 0.15 s) until the handler has written every event and closed. Each
contender runs in a fresh process (logging's state is global), alternating, best of ``--repeat``, each
after the machine goes idle, pinned to one CPU with ``--cpu``.

The mixes (``--mix``):

- ``every``: sglang's decode and prefill batch lines, and one start-up's memory lines (from
  ``tests/corpus/gen2_2025.log``) every ``--every`` records (0: request lines only).
- ``realistic``: what one sglang process logs at its defaults over a short life (``REALISTIC``): the
  lines of sglang 0.5.23 (``metrics_reporter.py``), a prefill batch line and an access line of uvicorn
  per request, a decode batch line every 40 decode steps (``decode_log_interval``), and one start-up.
  uvicorn's access logger does not propagate (its ``LOGGING_CONFIG``, which sglang's
  ``set_uvicorn_logging_configs`` keeps): its records have their own handler, as in the server, and
  never reach kvlog's. ``scheduler`` is the same without the access lines: what the scheduler's process,
  the one that logs the memory lines, logs.

``--instructions`` counts instead the instructions of the whole process under ``valgrind --tool=callgrind``
(every thread), robust where the machine is shared: each contender runs with ``--records`` and with
twice as many, and the difference is what the second ``--records`` records cost.

``--baseline TREE`` adds kvlog's handler from another source tree (a checkout of the commit before a
change) in the same rounds: each process runs with ``PYTHONSAFEPATH`` and that tree on ``PYTHONPATH``
(``python -c`` would otherwise put the working directory first on the path, and import its kvlog for
both trees).

Usage: ``.venv/bin/python benchmarks/bench_integrate.py [--mix every|realistic|scheduler] [--records N]
[--every K] [--repeat R] [--cpu C] [--instructions] [--baseline TREE]``.
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
#: sglang 0.5.23's batch lines at its defaults (``metrics_reporter.py``: no MFU metrics, no device timer, CUDA)
DECODE_LINE = (
    "Decode batch, #running-req: 16, #token: 5210, token usage: 0.02, cuda graph: True, "
    "gen throughput (token/s): 812.34, #queue-req: 0"
)
PREFILL_LINE = (
    "Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 0, token usage: 0.02, #running-req: 15, "
    "#queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): 10423.51"
)
#: uvicorn's access record (``httptools_impl``/``h11_impl``): a format and its arguments, formatted by its handler
ACCESS = ('%s - "%s %s HTTP/%s" %d', ["127.0.0.1:40712", "POST", "/v1/chat/completions", "1.1", 200])
#: One sglang process's life at its defaults, per start-up (see ``realistic``): 10 minutes at 5 requests a
#: second, 16 running requests of 256 output tokens. A request is one prefill batch line and one access
#: line; a decode step serves the 16, so 256 / 16 = 16 steps a request, and a line every 40 steps is 0.4
#: a request. Servers live far longer than 10 minutes: start-ups are here more frequent than served.
REALISTIC = {"requests": 3_000, "decode_lines_per_request": 0.4}

#: (logger: 0 sglang's scheduler, 1 uvicorn's access logger; message; arguments)
Record = tuple[int, str, list[object]]

RUN = """
import gc, json, logging, sys, time
# tuples of strings, which the collector stops tracking: loading twice the records must not mean more collections
records = [(channel, message, tuple(args)) for channel, message, args in json.load(open(sys.argv[1]))]
events, with_kvlog = sys.argv[2], sys.argv[3] == "1"
logging.basicConfig(level=logging.INFO, format="[%(asctime)s TP0] %(message)s", datefmt="%Y-%m-%d %H:%M:%S",
                    filename=sys.argv[4], force=True)
access = logging.getLogger("uvicorn.access")  # as uvicorn's LOGGING_CONFIG: its own handler, not propagated
access.propagate = False
access_handler = logging.FileHandler(sys.argv[4])
access_handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s:     %(message)s", "%Y-%m-%d %H:%M:%S"))
access.addHandler(access_handler)
access.setLevel(logging.INFO)
from kvlog.integrate.handler import EventHandler  # imported by both: a server's heap holds far more anyway
from kvlog.integrate.servers import SGLANG
from kvlog.migration.engine import Migrator
if with_kvlog:
    handler = EventHandler(SGLANG, events, ranks={"tp": 0})
    logging.getLogger().addHandler(handler)
loggers = [logging.getLogger("sglang.srt.managers.scheduler").info, access.info]
warm = int(sys.argv[5])
for channel, message, args in records[:warm]:  # the server's start-up: the handler's worker starts then
    loggers[channel](message, *args)
time.sleep(1.0)
gc.collect()  # what loading left to collect, in both contenders: not counted in the records' time
start = time.process_time()
for channel, message, args in records[warm:]:
    loggers[channel](message, *args)
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
#: contender: (with kvlog's handler, ``KVLOG_NATIVE``: None leaves it unset)
ENGINES = {"plain": (False, None), "kvlog": (True, None), "python": (True, "0")}


def tree_env(tree: Path, native: str | None = None) -> dict[str, str]:
    """The environment that imports kvlog from ``tree`` and from nowhere else (not the working directory)."""
    env = {k: v for k, v in os.environ.items() if k != "KVLOG_NATIVE"}
    return env | {"PYTHONSAFEPATH": "1", "PYTHONPATH": str(tree)} | ({"KVLOG_NATIVE": native} if native else {})


def memory_lines() -> list[str]:
    return [SGLANG.split(line).message for line in CORPUS.read_text().splitlines()]


def mix(records: int, every: int) -> list[Record]:
    """``records`` messages: request lines, and a start-up's memory lines every ``every`` records (0: none)."""
    if not every:
        return [(0, REQUEST_LINES[i % 2], []) for i in range(records)]
    memory = memory_lines()
    out: list[Record] = []
    while len(out) < records:
        out += [(0, REQUEST_LINES[i % 2], []) for i in range(every - len(memory))] + [(0, m, []) for m in memory]
    return out[:records]


def life(*, access: bool) -> list[Record]:
    """One process's life at sglang's defaults (``REALISTIC``): its start-up, then its requests' lines."""
    out: list[Record] = [(0, m, []) for m in memory_lines()]
    decode = 0.0
    for _ in range(REALISTIC["requests"]):
        out.append((0, PREFILL_LINE, []))
        decode += REALISTIC["decode_lines_per_request"]
        while decode >= 1:
            out.append((0, DECODE_LINE, []))
            decode -= 1
        if access:
            out.append((1, *ACCESS))
    return out


def realistic(records: int, *, access: bool) -> tuple[list[Record], int]:
    """``records`` records of process lives one after the other, and the records of one life."""
    one = life(access=access)
    return (one * (records // len(one) + 1))[:records], len(one)


def _command(records_json: Path, events: Path, tmp: Path, with_kvlog: bool, warm: int) -> list[str]:
    with_kvlog_arg = "1" if with_kvlog else "0"
    return [
        sys.executable,
        "-c",
        RUN,
        str(records_json),
        str(events),
        with_kvlog_arg,
        str(tmp / "server.log"),
        str(warm),
    ]


Contender = tuple[Path, bool, str | None]


def run(records_json: Path, events: Path, tmp: Path, contender: Contender, warm: int) -> float:
    tree, with_kvlog, native = contender
    done = subprocess.run(
        [*CPU, *_command(records_json, events, tmp, with_kvlog, warm)],
        capture_output=True,
        text=True,
        check=True,
        env=tree_env(tree, native),
    )
    return float(done.stdout)


def instructions(records_json: Path, events: Path, tmp: Path, contender: Contender, warm: int) -> int:
    """The instructions of the whole process (every thread), as callgrind counts them."""
    tree, with_kvlog, native = contender
    out = tmp / "callgrind.out"
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            "--dump-instr=no",
            "--compress-strings=no",
            *_command(records_json, events, tmp, with_kvlog, warm),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=tree_env(tree, native),
    )
    totals = [line for line in out.read_text().splitlines() if line.startswith("totals:")]
    return int(totals[0].split()[1])


#: the command prefix that pins a timed run to one CPU (``--cpu``)
CPU: list[str] = []


def passing_cost(tree: Path, native: str | None = None) -> float:
    """Seconds the handler of ``tree`` costs the server's thread for a record no probe matches."""
    wait_for_idle()
    command = [*CPU, sys.executable, "-c", PASSING, DECODE_LINE]
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=tree_env(tree, native))
    return float(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mix", choices=("every", "realistic", "scheduler"), default="every")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument(
        "--every", type=int, default=2_000, help="one start-up's memory lines every K records (0: none at all)"
    )
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--cpu", type=int, help="pin every timed process to this CPU (taskset)")
    parser.add_argument("--instructions", action="store_true", help="count instructions under callgrind instead")
    parser.add_argument("--baseline", type=Path, metavar="TREE", help="also time the handler of this source tree")
    args = parser.parse_args()
    if args.cpu is not None:
        CPU[:] = ["taskset", "-c", str(args.cpu)]
    if args.mix == "every":
        warm = args.every or 1_000  # the first cycle is the untimed start-up
        records = mix(warm + 2 * args.records, args.every)
    else:
        records, warm = realistic(2 * args.records, access=args.mix == "realistic")
        args.records -= args.records % warm  # whole lives: each holds one start-up
        records = records[:warm] + records
    timed = records[warm : warm + args.records]
    memory_share = sum(1 for _, m, _ in timed if m not in (*REQUEST_LINES, DECODE_LINE, PREFILL_LINE, ACCESS[0]))
    contenders = {name: (TREE, with_kvlog, native) for name, (with_kvlog, native) in ENGINES.items()}
    if args.baseline is not None:
        contenders["baseline"] = (args.baseline.resolve(), True, None)
    with tempfile.TemporaryDirectory(prefix="kvlog-bench-") as name:
        tmp = Path(name)
        if args.instructions:
            per_record = {}
            for contender, how in contenders.items():
                counts = []
                for size in (args.records, 2 * args.records):
                    records_json = tmp / "records.json"
                    records_json.write_text(json.dumps(records[: warm + size]))
                    counts.append(instructions(records_json, tmp / f"{contender}.jsonl", tmp, how, warm))
                per_record[contender] = (counts[1] - counts[0]) / args.records
            print(f"{args.mix} mix, {memory_share / args.records:.2%} memory lines; instructions a record (callgrind):")
            for contender, count in per_record.items():
                print(f"  {contender:>8}: {count:>10,.0f}  ({count / per_record['plain'] - 1:+.2%} against plain)")
            return
        records_json = tmp / "records.json"
        records_json.write_text(json.dumps(records[: warm + args.records]))
        seconds: dict[str, list[float]] = {contender: [] for contender in contenders}
        for _ in range(args.repeat):
            for contender, how in contenders.items():
                wait_for_idle()
                seconds[contender].append(run(records_json, tmp / f"{contender}.jsonl", tmp, how, warm))
        written = {c: tmp / f"{c}.jsonl" for c in contenders if contenders[c][1]}
        events = {c: len(p.read_bytes().splitlines()) // args.repeat if p.exists() else 0 for c, p in written.items()}
    if len(set(events.values())) > 1:
        raise SystemExit(
            f"the contenders wrote other numbers of events ({events}): the figures would compare other work"
        )
    best = {c: min(s) for c, s in seconds.items()}
    median = {c: sorted(s)[len(s) // 2] for c, s in seconds.items()}
    print(f"{args.mix} mix: {args.records} records, {memory_share / args.records:.2%} memory lines, ", end="")
    print(f"{events['kvlog']} events per run (with start-up); best and median of {args.repeat}")
    for contender in contenders:
        print(f"  {contender:>8}: {args.records / best[contender]:>10,.0f} records/s best, ", end="")
        cost_best, cost_median = best[contender] / best["plain"] - 1, median[contender] / median["plain"] - 1
        print(f"cost {cost_best:+.1%} best, {cost_median:+.1%} median")
    for contender, (tree, with_kvlog, native) in contenders.items():
        if with_kvlog:
            passing = passing_cost(tree, native)
            print(f"  {contender}: a record no probe matches costs the server's thread {passing * 1e9:.0f} ns")


if __name__ == "__main__":
    main()
