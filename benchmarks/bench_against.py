"""``kvlog validate`` and ``kvlog migrate`` of this tree against a baseline source tree, in one run.

A change to the reading of JSON lines (``kvlog.io.jsonline``: duplicate keys, nesting, the text of
numbers) must not slow the common path. This script times the same commands of two source trees on
the same generated files, interleaved round by round, each pinned to one core, and reports the
median CPU seconds of each and their ratio (this tree / baseline: below 1 is faster):

- ``validate``: a log of valid events as kvlog writes them (``bench_validate``'s mix), ``--jobs 1``;
- ``validate_spaced``: the same events written by Python's ``json.dumps`` (``", "`` and ``": "``), the
  lines that are read a second time for duplicate keys;
- ``migrate_server_log``: a server log (``bench_migrate``'s mix: request traffic and a few memory lines);
- ``migrate_v1_events``: JSON events of an older version only (``kv_arena.ready@1``, ``kv_pool.allocation@1``),
  every line migrated up the chain and written again: the worst case for the writing path.

Usage (the baseline is any checkout, e.g. a worktree of the commit before the change)::

    git worktree add /tmp/kvlog-base c36aaf9
    .venv/bin/python benchmarks/bench_against.py --baseline /tmp/kvlog-base [--lines 300000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson
from bench_migrate import generate as generate_server_log
from bench_validate import generate as generate_events

ROOT = Path(__file__).resolve().parent.parent
GIB = 1 << 30


def generate_spaced(events: Path, path: Path) -> None:
    """The events of ``events`` as Python's json module writes them: every line is read twice."""
    with events.open("rb") as source, path.open("w") as out:
        for line in source:
            out.write(json.dumps(orjson.loads(line)) + "\n")


def generate_v1_events(path: Path, lines: int) -> None:
    """Events of an older schema version, each of which migrate takes up the chain and writes again."""
    rng = random.Random(4)
    envelope = {"timestamp": "2026-07-20T10:00:00Z", "level": "info", "ranks": {"tp": 0}}
    with path.open("wb") as out:
        for number in range(lines):
            if number % 2:
                event = {
                    "event": "kv_arena.ready",
                    "schema_version": 1,
                    **envelope,
                    "arena_id": str(number % 4),
                    "device": number % 8,
                    "reserved_bytes": rng.randrange(1, 64) * GIB,
                    "granularity_bytes": 2 << 20,
                }
            else:
                event = {
                    "event": "kv_pool.allocation",
                    "schema_version": 1,
                    **envelope,
                    "label": None,
                    "layout": "mha",
                    "dtype": "torch.bfloat16",
                    "num_tokens": rng.randrange(1, 1 << 20),
                    "k_bytes": rng.randrange(1, 64) * GIB,
                    "v_bytes": rng.randrange(1, 64) * GIB,
                }
            out.write(orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE))


def timed(tree: Path, args: list[str], work: Path) -> float:
    """CPU seconds (user + system) of one ``kvlog`` command run from the source ``tree``, pinned to one core."""
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    # PYTHONSAFEPATH: ``python -m`` would put the working directory first on the path, and a run started
    # from a checkout would import that checkout's kvlog for both trees
    pythonpath = os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONSAFEPATH": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with (work / "stdout").open("wb") as sink:
        result = subprocess.run(
            [*pin, sys.executable, "-m", "kvlog", *args], stdout=sink, stderr=subprocess.PIPE, env=env, check=False
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode not in {0, 1}:
        raise SystemExit(f"kvlog {' '.join(args)} from {tree} failed: {result.stderr.decode()[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a source tree of kvlog to compare against")
    parser.add_argument("--lines", type=int, default=300_000, help="lines per generated file")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; the median is reported")
    args = parser.parse_args()
    trees = {"this tree": ROOT, "baseline": args.baseline.resolve()}

    with tempfile.TemporaryDirectory(prefix="bench_against-") as tmp:
        work = Path(tmp)
        events, spaced, server, v1 = (
            work / name for name in ("events.jsonl", "spaced.jsonl", "server.log", "v1.jsonl")
        )
        generate_events(events, args.lines)
        generate_spaced(events, spaced)
        generate_server_log(server, args.lines, seed=1)
        generate_v1_events(v1, args.lines)
        workloads = {
            "validate": ["validate", "--jobs", "1", str(events)],
            "validate_spaced": ["validate", "--jobs", "1", str(spaced)],
            "migrate_server_log": ["migrate", str(server), "-o", str(work / "server.out")],
            "migrate_v1_events": ["migrate", str(v1), "-o", str(work / "v1.out")],
        }
        cpu: dict[tuple[str, str], list[float]] = {(w, t): [] for w in workloads for t in trees}
        started = time.perf_counter()
        for round_number in range(args.rounds):
            for workload, command in workloads.items():
                order = list(trees.items()) if round_number % 2 else list(reversed(trees.items()))
                for tree_name, tree in order:
                    cpu[workload, tree_name].append(timed(tree, command, work))

    print(
        f"{args.lines} lines per file, median of {args.rounds} interleaved rounds, pinned to one core, "
        f"{time.perf_counter() - started:.0f} s; python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'workload':<22} {'this tree CPU s':>16} {'baseline CPU s':>15} {'ratio':>7}")
    for workload in workloads:
        mine, base = (statistics.median(cpu[workload, tree]) for tree in trees)
        print(f"{workload:<22} {mine:>16.3f} {base:>15.3f} {mine / base:>7.3f}")


if __name__ == "__main__":
    main()
