"""Time of ``kvlog summarize`` on a dense multi-rank fleet log, against other source trees in the same rounds.

``summarize`` reads its inputs through ``migrate``; until issue 31 it had ``migrate`` write every event
as a JSON line to a scratch file and decoded each again, twice. The log is ``bench_migrate``'s **dense
fleet log** (many short server runs of the golden corpus's dated sglang logs, their TP ranks moved up
to TP24, between stretches of request traffic; 1.5% of its lines are events) and its **plain** twin
(the same log without the runs): the events' cost is the difference. Each contender runs pinned to
one core (``taskset -c 0``), started once the machine is idle (``quiet.py``); rounds interleave the
contenders and the median round is reported, by CPU seconds of the child (the figure that barely
moves when others share the machine) and by wall time. ``--baseline TREE`` (repeatable) adds kvlog
from another source tree (a worktree of the commit before a change) to the same rounds; every tree
must write the same table (``kvlog_env``: PYTHONSAFEPATH, so that ``PYTHONPATH`` chooses the tree).
The ratios are a baseline's CPU over this tree's: above 1, this tree is faster.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_summarize.py [--lines 300000] [--rounds 3] \\
        [--baseline /tmp/base-1fdc331 --baseline /tmp/base-84eb474] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_migrate import PIN, about, count_lines, generate_dense, kvlog_env, timed
from quiet import wait_for_idle

#: a kvlog command line for one input (the log) and the file the contender writes
Command = Callable[[Path, Path], list[str]]
#: exit 1 is a run that found nothing to summarize or draw (the plain log): a run like any other here
FOUND_NOTHING_IS_FINE = ["sh", "-c", '"$@"; [ $? -le 1 ]', "sh"]


def summarize_command(log: Path, output: Path) -> list[str]:
    return [sys.executable, "-m", "kvlog", "summarize", "--format", "json", str(log), "-o", str(output)]


def as_written(output: bytes) -> bytes:
    """An output as it is compared between trees: byte for byte."""
    return output


def compare_trees(
    args: argparse.Namespace, work: Path, command: Command, suffix: str, normal: Callable[[bytes], bytes]
) -> dict[str, Any]:
    """Time ``command`` from this tree and each ``--baseline`` tree on the dense log and its plain twin.

    Each tree's output of the dense log (``suffix`` names its kind), as ``normal`` makes it, is compared
    with this tree's: where they differ, the figures compare other work (the report says so).
    """
    with_runs, without = work / "dense.log", work / "dense-plain.log"
    runs = generate_dense(with_runs, without, args.lines, seed=15)
    lines = {"dense": args.lines, "plain": count_lines(without)}
    bytecode = work / "bytecode"
    trees = {"kvlog": kvlog_env(None, bytecode, work / "kept")}
    for index, tree in enumerate(args.baseline or []):
        trees[f"baseline_{tree.name or index}"] = kvlog_env(tree.resolve(), bytecode, work / f"kept-{index}")
    for env in trees.values():  # untimed: writes the bytecode and what kvlog keeps, which the timed runs read
        timed(command(with_runs, work / f"warm-up{suffix}"), work / "stdout", env)
    contenders = {
        f"{name}_{log}": ([*PIN, *FOUND_NOTHING_IS_FINE, *command(path, work / f"{name}_{log}{suffix}")], env)
        for log, path in (("dense", with_runs), ("plain", without))
        for name, env in trees.items()
    }
    wall: dict[str, list[float]] = {name: [] for name in contenders}
    cpu: dict[str, list[float]] = {name: [] for name in contenders}
    load_before = os.getloadavg()[0]
    for _ in range(args.rounds):
        for name, (line, env) in contenders.items():
            wait_for_idle()
            seconds, cpu_seconds = timed(line, work / "stdout", env)
            wall[name].append(seconds)
            cpu[name].append(cpu_seconds)
    ours = normal((work / f"kvlog_dense{suffix}").read_bytes())
    same = {name: normal((work / f"{name}_dense{suffix}").read_bytes()) == ours for name in trees}
    median_wall = {name: statistics.median(times) for name, times in wall.items()}
    median_cpu = {name: statistics.median(times) for name, times in cpu.items()}
    return {
        "lines": lines,
        "runs": runs,
        "run_lines": lines["dense"] - lines["plain"],
        "load_average": (load_before, os.getloadavg()[0]),
        "same_output": same,
        "seconds": wall,
        "cpu_seconds": cpu,
        "median_wall": median_wall,
        "median_cpu": median_cpu,
        "baseline_cpu_over_this_tree": {
            f"{name}_{log}": median_cpu[f"{name}_{log}"] / median_cpu[f"kvlog_{log}"]
            for name in trees
            if name != "kvlog"
            for log in lines
        },
        "cpu_beyond_plain_s": {name: median_cpu[f"{name}_dense"] - median_cpu[f"{name}_plain"] for name in trees},
    }


def report(figures: dict[str, Any], rounds: int, what: str) -> None:
    lines, load = figures["lines"], figures["load_average"]
    print(
        f"{what} of the dense fleet log: {lines['dense']} lines, {figures['runs']} server runs "
        f"({figures['run_lines']} lines of runs); plain: the same without the runs, {lines['plain']} lines. "
        f"Median of {rounds} rounds, {os.cpu_count()} CPUs, load average {load[0]:.2f} -> {load[1]:.2f}"
    )
    print(f"{'contender':<34} {'CPU s':>8} {'wall s':>8}")
    for name in figures["median_cpu"]:
        print(f"{name:<34} {figures['median_cpu'][name]:>8.3f} {figures['median_wall'][name]:>8.3f}")
    for name, ratio in figures["baseline_cpu_over_this_tree"].items():
        print(f"{name + ' / this tree, by CPU':<44} {ratio:5.2f}x  (above 1: this tree is faster)")
    for name, seconds in figures["cpu_beyond_plain_s"].items():
        print(f"{name}: {seconds:.3f} CPU s for the runs' lines (dense minus plain)")
    for name, same in figures["same_output"].items():
        print(f"{name}: {'the same output as this tree' if same else 'OTHER OUTPUT than this tree'}")


def main(
    command: Command = summarize_command,
    what: str = "kvlog summarize",
    suffix: str = ".json",
    normal: Callable[[bytes], bytes] = as_written,
) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=300_000, help="lines of the generated log (default 300k)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    parser.add_argument("--baseline", type=Path, action="append", help="also time kvlog from this source tree")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_consumers-", dir=args.dir) as tmp:
        figures = compare_trees(args, Path(tmp), command, suffix, normal)
    report(figures, args.rounds, what)
    if args.json:
        args.json.write_text(json.dumps({**about(args), "figures": figures}, indent=2, default=str))


if __name__ == "__main__":
    main()
