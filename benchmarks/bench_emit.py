"""Events emitted per second: kvlog's validated pipeline against sglang's stdlib f-string line.

The baseline is what sglang does today for a KV pool allocation: a ``logging`` logger with a
``FileHandler`` and sglang's format (``[%(asctime)s TP0] %(message)s``), called as
``logger.info(f"KV Cache is allocated. #tokens: ..., K size: ... GB, V size: ... GB")``. kvlog logs
the same information as a typed ``kv_pool.allocation`` event (built in the loop, as a server would)
through ``kvlog.configure()`` to a file, JSON lines, validation on (``warn``, the production
default). Both flush every line, as both do by default. Other configurations are listed for
context: validation off, the console renderer, and the stdlib bridge (``configure(stdlib=True)`` and
``kvlog.formatter()`` on a FileHandler, JSON and console), which is what a server logging through
``logging``, as sglang does, would use.

Times are the process's CPU seconds (user + system, so the write system calls count): on a shared
machine they depend far less on other jobs than wall-clock time. Each run starts when the machine
is idle if it becomes so within a few seconds (``benchmarks/quiet.py``); best of ``--repeat``,
the contenders alternating.

Usage: ``.venv/bin/python benchmarks/bench_emit.py [--events N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from quiet import wait_for_idle

import kvlog
from kvlog import events
from kvlog.file_validation import Counts, validate_lines
from kvlog.schema.event_validator import EventValidator

GB = 1 << 30
DTYPE = "torch.bfloat16"


def stdlib_fstring(path: Path, n: int) -> float:
    """sglang today: an f-string through a stdlib FileHandler with sglang's prefix."""
    logger = logging.getLogger(f"sglang.bench.{path.name}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("[%(asctime)s TP0] %(message)s", datefmt="%Y-%m-%d %H:%M:%S"))
    logger.addHandler(handler)
    start = time.process_time()
    for i in range(n):
        size = 65536 + i
        k_size = v_size = size * 4096
        logger.info(
            f"KV Cache is allocated. #tokens: {size}, K size: {k_size / GB:.2f} GB, V size: {v_size / GB:.2f} GB"
        )
    elapsed = time.process_time() - start
    logger.removeHandler(handler)
    handler.close()
    return elapsed


def kvlog_events(n: int) -> float:
    """The same information as typed events, through whatever pipeline is configured."""
    kvlog.bind_ranks(tp=0)
    start = time.process_time()
    for i in range(n):
        size = 65536 + i
        kvlog.emit(
            events.KvPoolAllocation(
                pool="MHATokenToKVPool",
                label=None,
                layout="mha",
                allocation_state="allocated",
                dtype=DTYPE,
                num_tokens=size,
                k_bytes=size * 4096,
                v_bytes=size * 4096,
                committed_bytes=size * 8192,
            )
        )
    return time.process_time() - start


def kvlog_to_file(path: Path, n: int, **options: object) -> float:
    with path.open("w") as stream:
        kvlog.configure(stream=stream, **options)  # type: ignore[arg-type]
        return kvlog_events(n)


def kvlog_stdlib_bridge(path: Path, n: int, output: str) -> float:
    handler = logging.FileHandler(path)
    handler.setFormatter(kvlog.formatter(output))  # type: ignore[arg-type]
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    kvlog.configure(stdlib=True, validation="warn")
    try:
        return kvlog_events(n)
    finally:
        root.removeHandler(handler)
        handler.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5, help="best of N, alternating the contenders")
    args = parser.parse_args()
    n = args.events

    with tempfile.TemporaryDirectory(prefix="kvlog-bench-") as tmp:
        out = Path(tmp)
        contenders: dict[str, Callable[[], float]] = {
            "stdlib logging.info(f-string), FileHandler": lambda: stdlib_fstring(out / "stdlib.log", n),
            "kvlog JSON to file, validation=warn": lambda: kvlog_to_file(out / "warn.jsonl", n, validation="warn"),
            "kvlog JSON to file, validation=raise": lambda: kvlog_to_file(out / "raise.jsonl", n, validation="raise"),
            "kvlog JSON to file, validation=off": lambda: kvlog_to_file(out / "off.jsonl", n, validation="off"),
            "kvlog console to file, validation=warn": lambda: kvlog_to_file(
                out / "console.log", n, validation="warn", output="console"
            ),
            "kvlog JSON via stdlib bridge, validation=warn": lambda: kvlog_stdlib_bridge(
                out / "bridge.jsonl", n, "json"
            ),
            "kvlog console via stdlib bridge, validation=warn": lambda: kvlog_stdlib_bridge(
                out / "bridge.log", n, "console"
            ),
        }
        best = dict.fromkeys(contenders, float("inf"))
        for _ in range(args.repeat):
            for label, run in contenders.items():
                wait_for_idle()
                best[label] = min(best[label], run())

        summary = Counts()
        with (out / "warn.jsonl").open("rb") as written:
            problems = list(validate_lines("warn.jsonl", written, summary, EventValidator()))
        assert not problems and summary.events == n, "every emitted event must be valid"

    baseline = best["stdlib logging.info(f-string), FileHandler"]
    print(f"{n} events per run, best of {args.repeat}; python {sys.version.split()[0]}; {os.cpu_count()} CPUs")
    for label, seconds in best.items():
        print(
            f"{label:50} {n / seconds / 1e3:8.1f} k events/s {seconds / n * 1e6:6.2f} us/event "
            f"{baseline / seconds:5.2f}x stdlib"
        )


if __name__ == "__main__":
    main()
