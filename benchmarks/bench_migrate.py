"""Throughput of ``kvlog migrate --format jsonl`` against ``sed -E`` and mtail, on a generated server log.

The log is what a long-running sglang server writes: request traffic (prefill and decode batches,
uvicorn access lines, ``KV cache hit rate``) with, once per server run, the handful of memory lines
``kvlog migrate`` rewrites (pre-fix post-capture wording: arenas, ``is allocated``, ``SWAKVPool mem
usage``, host pools, ``Memory pool end``). Baselines, timed in the same run on the same file:

- ``sed``: ``sed -E`` doing only the two renames (``reserved=`` -> ``reserved_va=``, ``is allocated``
  -> ``VA upper bound``): the least any rewrite of the file costs;
- ``mtail``: ``mtail --one_shot`` running ``examples/monitoring/sglang_legacy.mtail``, what operators
  already run over these logs.

``kvlog``, ``sed`` and ``mtail`` are pinned to one core (``taskset -c 0``) so that the ratios compare
single-core work. ``kvlog_startup`` (an empty file) is the interpreter and import cost every run
pays; it is included in the ``kvlog`` figure and shown apart for whoever profiles. The ``--jobs``
figure is unpinned: ``--jobs 2`` over two such files against one file with one job, as lines per
second; on two cores the goal is near 2x. As a control of the parallelism the machine gives during
the run (others may be using it), two ``sed`` runs on the two files at once are timed against one.
Files live in ``--dir`` (default ``/dev/shm``, a tmpfs, so that disk speed is not what is measured);
every variant writes its output there (kvlog with ``-o``, the others by redirection). Rounds
interleave the variants and the median round is reported, as wall time and as CPU seconds of the
child processes (the latter barely moves when other work shares the machine; the load average is
printed).
Goals (issue 4): kvlog/sed >= 1, kvlog/mtail >= 5, jobs scaling near 2.

That log holds 64 memory lines per million: what they cost does not show. The **dense fleet log**
(issue 15) is what a fleet's or a CI job's aggregate holds: many short server runs, each the start-up
of one of the golden corpus's dated sglang runs (every wording generation, arenas before and after the
wording fix, post-capture sizing, HiCache, SWA) moved to other ranks and to the log's time, between
stretches of the same request traffic; 1.5% of its lines become events. Its **plain** twin is the same
log without the runs. kvlog and ``sed`` (the two renames) take turns on both, pinned, each run started
once the machine is idle (``quiet.py``); the figures are CPU-time ratios to sed on the same file and
the CPU each event costs beyond the plain log. ``--baseline TREE`` adds kvlog from another source tree
(the commit before a change) to the same rounds. kvlog keeps what it derives from its schema and migration
files across runs (``kvlog.schema.stored``, in the work directory here, filled by an untimed warm-up run);
``kvlog_nothing_kept`` is the same kvlog deriving it all at every start, as a first run after an edit
does. Goals (issue 15): kvlog/sed >= 1 on both logs, at most 5 us per memory line. ``--usage`` adds ``kvlog
migrate --usage sampled`` and ``--usage all`` on the dense log (80% of whose lines are sglang's decode and
prefill batches, each a usage line) to the same rounds, as ratios to the default (issue 32: the usage lines
are read only when asked).

The dense log repeats the golden corpus's messages: it measures the path where a message was read
before. The **miss-path log** (issue 34) is the same log with every figure of its memory lines drawn at
random and its ranks moved up to TP254, so that no memory message recurs, as on a held-out log; its
plain twin is the same plain log. ``--corpus FILE`` adds any log (a held-out one) to the same rounds;
``--held-out`` adds the **held-out-style plain log** (issue 34, ``generate_held_out``): request traffic only,
a third of it uvicorn's chat-completions lines, whose probe bytes the other plain log barely holds. Each
log is also counted by ``grep -c`` (the two lines ``sed`` renames): the least any reading of it costs.
``kvlog_python`` is the same kvlog with ``KVLOG_NATIVE=0``: its Python prefilter where the native core
(``kvlog._native``) is built, so that both engines are timed in the same rounds (issue 34).
``--baseline`` figures are also given as the baseline's CPU over this tree's, by median and best round.

    .venv/bin/python benchmarks/bench_migrate.py [--lines 1000000] [--rounds 3] [--json out.json]
    .venv/bin/python benchmarks/bench_migrate.py --dense-only [--baseline /tmp/kvlog-base [--baseline-reads-less]]
        [--rounds 5] [--usage] [--corpus held-out.log] [--held-out]
    .venv/bin/python benchmarks/bench_migrate.py --profile   # cProfile of one pinned kvlog run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from quiet import wait_for_idle

ROOT = Path(__file__).resolve().parent.parent
LEGACY_PROGRAM = ROOT / "examples" / "monitoring" / "sglang_legacy.mtail"
SED_RENAMES = [
    "-e",
    r"s/ reserved=([0-9.]+ GiB)/ reserved_va=\1/",
    "-e",
    r"s/KV Cache is allocated\./KV Cache VA upper bound./",
]
#: ``grep -c`` of the two lines ``sed`` renames: what finding the memory lines of a log costs, without writing it
GREP_COUNT = ["grep", "-c", "-E", r" reserved=[0-9.]+ GiB|KV Cache is allocated\."]
PIN = ["taskset", "-c", "0"]
#: ``0`` runs kvlog's Python engine where the native core is built (``kvlog.native.ENV``)
NATIVE_ENV = "KVLOG_NATIVE"
#: two seds at once, as a control of how much parallelism the machine gives right now
SED_PAIR = " ".join(["sed -E", *(f"'{a}'" for a in SED_RENAMES), '"$1" > "$3/a.out" &'])
SED_PAIR += " " + " ".join(["sed -E", *(f"'{a}'" for a in SED_RENAMES), '"$2" > "$3/b.out"; wait'])
RUN_EVERY = 250_000  # lines between server restarts, each printing its memory lines
CORPUS = ROOT / "tests" / "corpus"
#: the golden corpus's dated sglang logs: every wording generation, with arenas, post-capture, HiCache and SWA
DENSE_CORPUS = (
    "gen1_early_2025",
    "gen2_2025",
    "gen3_dtype_2026",
    "hybrid_swa_2026",
    "postcapture_before_fix_2026_07",
    "postcapture_after_fix_2026_09",
)
DENSE_EVERY = 560  # lines between server runs of the dense log, on average: 1.5% of its lines become events
#: a line's time and ranks (``[2025-06-03 11:20:41 PP1 TP0]``), the parts of its prefix the dense log moves
DENSE_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d((?: [A-Z_]+\d+)*)\]")
#: a figure ``random_figures`` draws anew: a decimal, or a count of five digits or more
FIGURE = re.compile(r"(?<![\w.])(\d+)(?:\.(\d+)|(?<=\d{5}))(?![\w.])")


def memory_lines(stamp: str, tp: int) -> list[str]:
    """What one rank prints about KV memory when a server starts (post-capture, before the fix)."""
    p = f"[{stamp} TP{tp}] "
    return [
        f"{p}Load weight begin. avail mem=139.06 GB",
        f"{p}KvVmmArena[0] ready: device={tp} reserved=9.2 GiB granularity=2048 KiB",
        f"{p}KvVmmArena[1] ready: device={tp} reserved=11.2 GiB granularity=2048 KiB",
        f"{p}SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1061120, K size: 4.05 GB, V size: 4.05 GB",
        f"{p}Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1326400, K size: 5.06 GB, V size: 5.06 GB",
        f"{p}SWAKVPool mem usage: 18.22 GB, swa size: 1061120, full size: 1326400",
        f"{p}Memory pool end. avail mem=75.31 GB",
        f"{p}Allocating full hierarchical KV host pool: 2652800 tokens, 21.73 GB host memory.",
    ]


def request_line(rng: random.Random, stamp: str) -> str:
    """One line of ordinary traffic, in the proportions a busy server prints them."""
    kind = rng.random()
    if kind < 0.55:
        running, tokens = rng.randint(1, 256), rng.randint(1000, 900_000)
        return (
            f"[{stamp} TP0] Decode batch. #running-req: {running}, #token: {tokens}, token usage: "
            f"{tokens / 1_326_400:.2f}, cuda graph: True, gen throughput (token/s): {rng.uniform(100, 9000):.2f}, "
            f"#queue-req: {rng.randint(0, 40)}"
        )
    if kind < 0.8:
        new, cached = rng.randint(1, 16384), rng.randint(0, 65536)
        return (
            f"[{stamp} TP0] Prefill batch. #new-seq: {rng.randint(1, 8)}, #new-token: {new}, #cached-token: {cached}, "
            f"token usage: {rng.random():.2f}, #running-req: {rng.randint(0, 256)}, #queue-req: {rng.randint(0, 40)}"
        )
    if kind < 0.97:
        client = f"10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}:{rng.randint(30000, 65000)}"
        return f'[{stamp}] INFO:     {client} - "POST /generate HTTP/1.1" 200 OK'
    return f"[{stamp}] KV cache hit rate: {rng.uniform(0, 100):.2f}%"


def held_out_line(rng: random.Random, stamp: str) -> str:
    """One line of a held-out-style log's request traffic (issue 34): chat completions over eight ranks.

    35% uvicorn access lines for ``/v1/chat/completions`` (as uvicorn prints them, without sglang's
    prefix), 5% ``Cache flushed successfully!``, the rest decode and prefill batches on ranks TP0-TP7:
    the probe bytes of ``completions`` (``m``) and ``successfully!`` (``y``, ``!``) are common here,
    where the other plain log barely has them.
    """
    kind, prefix = rng.random(), f"[{stamp} TP{rng.randint(0, 7)}]"
    if kind < 0.35:
        client = f"10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}:{rng.randint(30000, 65000)}"
        return f'INFO:     {client} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
    if kind < 0.4:
        return f"{prefix} Cache flushed successfully!"
    if kind < 0.75:
        tokens = rng.randint(1000, 900_000)
        return (
            f"{prefix} Decode batch. #running-req: {rng.randint(1, 256)}, #token: {tokens}, token usage: "
            f"{rng.random():.2f}, gen throughput (token/s): {rng.uniform(100, 9000):.2f}, "
            f"#queue-req: {rng.randint(0, 40)}"
        )
    new, cached = rng.randint(1, 16384), rng.randint(0, 65536)
    return (
        f"{prefix} Prefill batch. #new-seq: {rng.randint(1, 8)}, #new-token: {new}, #cached-token: {cached}, "
        f"token usage: {rng.random():.2f}, #running-req: {rng.randint(0, 256)}, #queue-req: {rng.randint(0, 40)}"
    )


def generate_held_out(path: Path, lines: int, seed: int = 34) -> None:
    """Write the held-out-style plain log: ``held_out_line`` traffic only, 200 lines a second."""
    rng = random.Random(seed)
    with path.open("w") as out:
        for written in range(lines):
            second = written // 200
            out.write(held_out_line(rng, f"2026-12-{1 + second // 86400 % 28:02d} {clock(second)}") + "\n")


def clock(second: int) -> str:
    """The time of day ``second`` seconds into a day, as sglang prints it."""
    return f"{second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d}"


def generate(path: Path, lines: int, seed: int) -> int:
    """Write the mixed log; return how many memory lines it holds."""
    rng = random.Random(seed)
    memory = 0
    with path.open("w") as out:
        written = 0
        while written < lines:
            second = written // 200
            stamp = f"2026-07-{21 + second // 86400 % 9:02d} {clock(second)}"
            if written % RUN_EVERY == 0:
                block = [f"[{stamp}] server_args=ServerArgs(model_path='openai/gpt-oss-120b', tp_size=2)"]
                block += memory_lines(stamp, 0) + memory_lines(stamp, 1)
                block = block[: lines - written]
                memory += len(block) - 1
            else:
                block = [request_line(rng, stamp)]
            out.write("\n".join(block) + "\n")
            written += len(block)
    return memory


def corpus_runs() -> list[list[str]]:
    """The dated sglang logs of the golden corpus, cut into server runs (each starts at ``server_args=``)."""
    runs: list[list[str]] = []
    for name in DENSE_CORPUS:
        for line in (CORPUS / f"{name}.log").read_text().splitlines():
            if "server_args=" in line or not runs:
                runs.append([])
            runs[-1].append(line)
    return runs


def fleet_line(line: str, stamp: str, offset: int) -> str:
    """A corpus line as another rank prints it in another run: its prefix's time and TP ranks moved."""
    match = DENSE_PREFIX.match(line)
    if match is None:
        return line  # no prefix (a bare message, a glued tqdm bar): printed as it was
    ranks = re.sub(r"\bTP(\d+)", lambda tp: f"TP{int(tp.group(1)) + offset}", match.group(1))
    return f"[{stamp}{ranks}]{line[match.end() :]}"


def random_figures(line: str, rng: random.Random) -> str:
    """``line`` with each figure of its message drawn at random in the figure's own shape.

    A decimal keeps its count of decimals, a count of five digits or more its count of digits; small
    integers (a device, an arena's index, a granularity) stay, so that the line still reads. A fleet's
    figures differ from run to run: no message recurs, which is what every memory line of a held-out
    log costs (the miss path), where the golden corpus's repeated figures measure the cache.
    """
    match = DENSE_PREFIX.match(line)
    cut = match.end() if match is not None else 0

    def drawn(figure: re.Match[str]) -> str:
        whole, decimals = figure.group(1), figure.group(2)
        if decimals is not None:
            return f"{rng.randint(1, 10 ** len(whole) - 1)}.{rng.randint(0, 10 ** len(decimals) - 1):0{len(decimals)}d}"
        return str(rng.randint(10 ** (len(whole) - 1), 10 ** len(whole) - 1))

    return line[:cut] + FIGURE.sub(drawn, line[cut:])


def generate_dense(dense: Path, plain: Path, lines: int, seed: int, *, miss: bool = False) -> int:
    """Write the dense fleet log and the same log without its server runs; return how many runs it holds.

    A fleet's or a CI job's aggregate is many short server runs, each printing a start-up's memory
    lines on every rank: the runs of the corpus, taken at random, their TP ranks moved by an even
    offset up to 14 (TP0..TP10 become TP0..TP24) and their time that of the log, between stretches of
    request traffic. The
    same message text so recurs under many prefixes, as it does in such a log. The plain log is the
    dense one with the runs left out: what the memory lines cost is the difference.

    ``miss``: the **miss-path** log, a held-out log's likeness: every figure of a run's memory lines
    drawn at random (``random_figures``) and ranks moved by up to 254 (many ranks), so that no memory
    message recurs. Its request traffic is the same as without ``miss`` (its own generator draws the
    figures and ranks): the plain log is the same file either way.
    """
    rng = random.Random(seed)
    figures = random.Random(seed + 1)
    runs = corpus_runs()
    started = 0
    with dense.open("w") as with_runs, plain.open("w") as without:
        written = 0
        while written < lines:
            second = written // 200
            stamp = f"2026-11-{1 + second // 86400 % 28:02d} {clock(second)}"
            if rng.random() < 1 / DENSE_EVERY:
                offset = 2 * rng.randint(0, 7)
                block = [fleet_line(line, stamp, offset) for line in rng.choice(runs)][: lines - written]
                if miss:
                    offset = 2 * figures.randint(0, 127)
                    block = [random_figures(fleet_line(line, stamp, offset), figures) for line in block]
                with_runs.write("\n".join(block) + "\n")
                written += len(block)
                started += 1
            else:
                line = request_line(rng, stamp)
                with_runs.write(line + "\n")
                without.write(line + "\n")
                written += 1
    return started


def timed(
    command: list[str], output: Path, env: dict[str, str] | None = None, accepted: tuple[int, ...] = (0,)
) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of ``command``, its standard output going to ``output``.

    ``accepted``: the exit statuses that are not failures (``grep -c`` exits 1 where it counts none).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with output.open("wb") as sink:
        start = time.perf_counter()
        result = subprocess.run(command, stdout=sink, stderr=subprocess.PIPE, check=False, env=env)
        elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode not in accepted:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}): {result.stderr.decode()[-2000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def count_lines(path: Path) -> int:
    with path.open("rb") as stream:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: stream.read(1 << 20), b""))


def count_events(path: Path) -> int:
    """The events in a ``kvlog migrate --format jsonl`` output: its JSON lines (the log itself has none)."""
    with path.open("rb") as stream:
        return sum(line.startswith(b"{") for line in stream)


def kvlog_env(tree: Path | None, bytecode: Path, kept: Path | None) -> dict[str, str]:
    """The environment that runs ``python -m kvlog`` from the source ``tree`` (None: the installed one).

    ``kept`` is where kvlog keeps what it derives from its schema and migration files across runs
    (``KVLOG_CACHE_DIR``); the untimed warm-up run fills it, so the timed runs are what a user's every
    run but the first after an install or an edit costs. None: nothing kept, every run derives it all.

    Bytecode is cached in ``bytecode``, apart from the trees: with PYTHONDONTWRITEBYTECODE a tree
    without up-to-date ``.pyc`` files (a fresh checkout, a module just changed) would compile its
    modules at every start, and the start-up measured would depend on the checkout, not on kvlog.
    PYTHONSAFEPATH (as ``bench_against``): ``python -m`` would put the working directory first on the
    path, and a run started from a checkout would import that checkout's kvlog for both trees.
    """
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PYTHONPYCACHEPREFIX": str(bytecode / (tree.name if tree else "installed")), "PYTHONSAFEPATH": "1"}
    env["KVLOG_CACHE_DIR"] = str(kept) if kept is not None else ""
    env.pop(NATIVE_ENV, None)  # the engine a user gets; ``kvlog_python`` sets it
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))
    return env


def dense(args: argparse.Namespace, work: Path, kvlog: list[str]) -> dict[str, Any]:
    """kvlog against ``sed -E`` on the dense fleet log and on the same log without its runs (issue 15).

    Contenders alternate within each round, each started once the machine is idle (``quiet``), pinned to
    one core; the median round is reported, by CPU seconds (the figure that barely moves when others
    share the machine) and by wall time. ``--baseline TREE`` adds kvlog run from another source tree
    (the commit before a change) on both logs, in the same rounds.
    """
    with_runs, without, miss = work / "dense.log", work / "dense-plain.log", work / "dense-miss.log"
    runs = generate_dense(with_runs, without, args.lines, seed=15)
    generate_dense(miss, work / "dense-plain-again.log", args.lines, seed=15, miss=True)  # the same plain log
    logs = {"dense": with_runs, "miss": miss, "plain": without}
    if args.corpus is not None:
        logs["corpus"] = args.corpus.resolve()
    if args.held_out:
        generate_held_out(work / "held-out.log", args.lines)
        logs["held_out"] = work / "held-out.log"
    lines = {log: count_lines(path) for log, path in logs.items()}
    bytecode = work / "bytecode"
    trees = {"kvlog": kvlog_env(None, bytecode, work / "kept"), "kvlog_nothing_kept": kvlog_env(None, bytecode, None)}
    # the same kvlog on its Python prefilter (kvlog.native), where the native core is built: the reference's cost
    trees["kvlog_python"] = trees["kvlog"] | {NATIVE_ENV: "0"}
    if args.baseline:
        trees["kvlog_baseline"] = kvlog_env(args.baseline.resolve(), bytecode, work / "kept-baseline")
    engines = {}
    for name, env in trees.items():  # untimed: writes the bytecode every timed run then reads
        timed([*kvlog, str(with_runs), "-o", str(work / "warm-up.out")], work / "stdout", env)
        said = subprocess.run([*kvlog[:3], "--version"], env=env, capture_output=True, text=True, check=True).stdout
        engines[name] = said.partition("hot paths: ")[2].strip() or "Python (a tree without kvlog.native)"
    commands: dict[str, tuple[list[str], Path, dict[str, str] | None]] = {}
    counted = {f"grep_{log}" for log in logs}  # grep -c exits 1 where it counts no line
    for log, path in logs.items():
        for name, env in trees.items():
            commands[f"{name}_{log}"] = (
                [*PIN, *kvlog, str(path), "-o", str(work / f"{name}_{log}.out")],
                work / "stdout",
                env,
            )
        commands[f"sed_{log}"] = ([*PIN, "sed", "-E", *SED_RENAMES, str(path)], work / f"sed_{log}.out", None)
        commands[f"grep_{log}"] = ([*PIN, *GREP_COUNT, str(path)], work / f"grep_{log}.out", None)
    for mode in ("sampled", "all") if args.usage else ():  # the usage lines read, on the dense log (80% of its lines)
        commands[f"kvlog_usage_{mode}_dense"] = (
            [*PIN, *kvlog, "--usage", mode, str(with_runs), "-o", str(work / f"kvlog_usage_{mode}.out")],
            work / "stdout",
            trees["kvlog"],
        )
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    load_before = os.getloadavg()[0]
    for _ in range(args.rounds):
        for name, (command, output, env) in commands.items():
            wait_for_idle()
            seconds, cpu_seconds = timed(command, output, env, (0, 1) if name in counted else (0,))
            wall[name].append(seconds)
            cpu[name].append(cpu_seconds)
    events_of = {log: count_events(work / f"kvlog_{log}.out") for log in logs}
    events = events_of["dense"]
    written = {log: count_lines(work / f"kvlog_{log}.out") for log in logs}
    baseline_events = {}  # what the baseline tree wrote, where --baseline-reads-less lets it write other events
    for name in trees:  # the same work: the same events and lines (a generated log's lines, each one written)
        for log, expected in written.items():
            out = work / f"{name}_{log}.out"
            events_written = count_events(out)
            other_events = events_written != events_of[log]
            if other_events and name == "kvlog_baseline" and args.baseline_reads_less:
                baseline_events[log] = events_written
                other_events = False
            if other_events or count_lines(out) != expected or expected < lines[log]:
                raise SystemExit(f"{name} wrote other events or lines on the {log} log: it would compare other work")
    median_wall = {name: statistics.median(runs) for name, runs in wall.items()}
    median_cpu = {name: statistics.median(runs) for name, runs in cpu.items()}
    ratios = {
        f"{name}_{log}_over_sed": {
            "cpu": median_cpu[f"sed_{log}"] / median_cpu[f"{name}_{log}"],
            "wall": median_wall[f"sed_{log}"] / median_wall[f"{name}_{log}"],
        }
        for name in trees
        for log in lines
    }
    over_grep = {
        f"{name}_{log}_over_grep": median_cpu[f"grep_{log}"] / median_cpu[f"{name}_{log}"]
        for name in trees
        for log in lines
    }
    usage = {  # what reading the usage lines costs, against the default (none read) in the same rounds
        f"usage_{mode}_over_default": {
            "cpu": median_cpu[f"kvlog_usage_{mode}_dense"] / median_cpu["kvlog_dense"],
            "wall": median_wall[f"kvlog_usage_{mode}_dense"] / median_wall["kvlog_dense"],
            "events": count_events(work / f"kvlog_usage_{mode}.out"),
        }
        for mode in (("sampled", "all") if args.usage else ())
    }
    # what the memory lines cost: the dense log's CPU beyond that of the same log without its runs
    per_event_us = {name: (median_cpu[f"{name}_dense"] - median_cpu[f"{name}_plain"]) / events * 1e6 for name in trees}
    per_miss_us = {
        name: (median_cpu[f"{name}_miss"] - median_cpu[f"{name}_plain"]) / events_of["miss"] * 1e6 for name in trees
    }
    best_cpu = {name: min(runs) for name, runs in cpu.items()}
    over_baseline = {  # each log's CPU seconds of the baseline tree over this tree's, in the same rounds
        log: {
            "median": median_cpu[f"kvlog_baseline_{log}"] / median_cpu[f"kvlog_{log}"],
            "best": best_cpu[f"kvlog_baseline_{log}"] / best_cpu[f"kvlog_{log}"],
        }
        for log in logs
        if "kvlog_baseline" in trees
    }
    return {
        "engines": engines,
        "lines": lines,
        "runs": runs,
        "events": events,
        "events_of": events_of,
        "load_average": (load_before, os.getloadavg()[0]),
        "seconds": wall,
        "cpu_seconds": cpu,
        "median_wall": median_wall,
        "median_cpu": median_cpu,
        "best_cpu": best_cpu,
        "ratios": ratios,
        "over_grep": over_grep,
        "per_event_us": per_event_us,
        "per_miss_us": per_miss_us,
        "over_baseline": over_baseline,
        "baseline_events": baseline_events,
        "usage": usage,
    }


def report_dense(figures: dict[str, Any], rounds: int) -> None:
    lines, events = figures["lines"], figures["events"]
    load = figures["load_average"]
    print(
        f"dense fleet log: {lines['dense']} lines, {figures['runs']} server runs, {events} events "
        f"({events / lines['dense']:.1%} of its lines); plain: the same without the runs, {lines['plain']} lines. "
        f"Median of {rounds} rounds, load average {load[0]:.2f} -> {load[1]:.2f}"
    )
    for name, engine in figures["engines"].items():
        print(f"{name}: hot paths {engine}")
    for log in lines:
        native_over_python = figures["median_cpu"][f"kvlog_python_{log}"] / figures["median_cpu"][f"kvlog_{log}"]
        print(f"{log} log: kvlog {native_over_python:5.2f}x the speed of kvlog_python by median CPU")
    print(f"{'variant':<26} {'CPU s':>8} {'wall s':>8}")
    for name in figures["median_cpu"]:
        print(f"{name:<26} {figures['median_cpu'][name]:>8.3f} {figures['median_wall'][name]:>8.3f}")
    for name, ratio in figures["ratios"].items():
        verdict = "met" if ratio["cpu"] >= 1.0 else "MISSED"
        print(f"{name:<34} {ratio['cpu']:5.2f}x by CPU, {ratio['wall']:5.2f}x by wall  (goal >= 1.0x: {verdict})")
    for name, ratio in figures["over_grep"].items():
        print(f"{name:<34} {ratio:5.2f}x by CPU  (grep -c's CPU over kvlog's)")
    print(
        "miss-path log: the dense log with every memory figure random and ranks up to TP254, "
        f"{figures['events_of']['miss']} events"
    )
    if "held_out" in figures["events_of"]:
        print(f"held-out-style plain log: {lines['held_out']} lines, {figures['events_of']['held_out']} events")
    if "corpus" in figures["events_of"]:
        print(f"corpus log: {lines['corpus']} lines, {figures['events_of']['corpus']} events")
    for name, micros in figures["per_event_us"].items():
        print(f"{name}: {micros:.1f} us of CPU per memory line (event) beyond the plain log  (goal <= 5 us)")
    for name, micros in figures["per_miss_us"].items():
        print(f"{name}: {micros:.1f} us of CPU per memory line of the miss-path log beyond the plain log")
    for log, written in figures["baseline_events"].items():
        print(f"{log} log: the baseline tree wrote {written} events, this tree {figures['events_of'][log]}")
    for log, ratio in figures["over_baseline"].items():
        print(
            f"{log} log: {ratio['median']:5.2f}x the baseline tree's speed by median CPU, "
            f"{ratio['best']:5.2f}x by best CPU (baseline CPU / this tree's)"
        )
    for name, ratio in figures["usage"].items():
        print(f"{name:<34} {ratio['cpu']:5.2f}x the CPU, {ratio['wall']:5.2f}x the wall time, {ratio['events']} events")


def about(args: argparse.Namespace) -> dict[str, Any]:
    """When, where and how the figures were taken."""
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs",
        "command": " ".join(sys.argv),
        "dir": str(args.dir),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000, help="lines per generated log (default 1M)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    parser.add_argument("--profile", action="store_true", help="profile one pinned kvlog run with cProfile and stop")
    parser.add_argument("--dense-only", action="store_true", help="time only the dense fleet log against sed")
    parser.add_argument("--baseline", type=Path, help="also time kvlog from this source tree on the dense logs")
    parser.add_argument(
        "--baseline-reads-less",
        action="store_true",
        help="let the --baseline tree write other events (an older tree reads fewer wordings): both counts are shown",
    )
    parser.add_argument("--corpus", type=Path, help="also time kvlog and sed on this log, beside the generated ones")
    parser.add_argument(
        "--held-out", action="store_true", help="also time the held-out-style plain log (issue 34) against sed and grep"
    )
    parser.add_argument(
        "--usage", action="store_true", help="also time --usage sampled and all on the dense log, against the default"
    )
    args = parser.parse_args()
    for tool in ("sed", "taskset") if args.dense_only else ("sed", "mtail", "taskset"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench_migrate needs {tool} on PATH (mtail: apt-get install mtail)")
    kvlog = [sys.executable, "-m", "kvlog", "migrate", "--format", "jsonl"]

    with tempfile.TemporaryDirectory(prefix="bench_migrate-", dir=args.dir) as tmp:
        work = Path(tmp)
        if args.dense_only:
            dense_figures = dense(args, work, kvlog)
            report_dense(dense_figures, args.rounds)
            if args.json:
                args.json.write_text(json.dumps({**about(args), "dense": dense_figures}, indent=2))
            return
        one, two = work / "server-a.log", work / "server-b.log"
        memory = generate(one, args.lines, seed=1)
        generate(two, args.lines, seed=2)
        if args.profile:
            profile = [sys.executable, "-m", "cProfile", "-s", "tottime", "-m", "kvlog", "migrate", "--format", "jsonl"]
            command = [*PIN, *profile, str(one), "-o", str(work / "profile.out")]
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            print("\n".join(result.stdout.splitlines()[:40]), result.stderr, sep="\n")
            return
        progs = work / "progs"
        progs.mkdir()
        shutil.copy(LEGACY_PROGRAM, progs)
        empty = work / "empty.log"
        empty.touch()
        variants: dict[str, tuple[Callable[[], tuple[float, float]], int]] = {
            "kvlog": (
                lambda: timed([*PIN, *kvlog, str(one), "-o", str(work / "kvlog.out")], work / "stdout"),
                args.lines,
            ),
            "kvlog_startup": (
                lambda: timed([*PIN, *kvlog, str(empty), "-o", str(work / "empty.out")], work / "stdout"),
                0,
            ),
            "sed": (lambda: timed([*PIN, "sed", "-E", *SED_RENAMES, str(one)], work / "sed.out"), args.lines),
            "mtail": (
                lambda: timed(
                    [
                        *PIN,
                        "mtail",
                        "--one_shot",
                        "--one_shot_format=prometheus",
                        "--progs",
                        str(progs),
                        "--logs",
                        str(one),
                    ],
                    work / "mtail.out",
                ),
                args.lines,
            ),
            "sed_one_file_unpinned": (
                lambda: timed(["sed", "-E", *SED_RENAMES, str(one)], work / "sed1.out"),
                args.lines,
            ),
            "sed_two_files_parallel": (
                lambda: timed(["sh", "-c", SED_PAIR, "sed_pair", str(one), str(two), str(work)], work / "sed2.out"),
                2 * args.lines,
            ),
            "kvlog_jobs1_one_file": (
                lambda: timed([*kvlog, str(one), "-o", str(work / "one.out")], work / "stdout"),
                args.lines,
            ),
            "kvlog_jobs2_two_files": (
                lambda: timed([*kvlog, "--jobs", "2", str(one), str(two), "-o", str(work / "two")], work / "stdout"),
                2 * args.lines,
            ),
        }
        load_before = os.getloadavg()[0]
        seconds: dict[str, list[float]] = {name: [] for name in variants}
        cpu_seconds: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, (run, _lines) in variants.items():
                wall, cpu = run()
                seconds[name].append(wall)
                cpu_seconds[name].append(cpu)
        load = (load_before, os.getloadavg()[0])
        migrated_lines = count_lines(work / "kvlog.out")
        if migrated_lines != args.lines:
            raise SystemExit(f"kvlog migrate wrote {migrated_lines} lines for {args.lines}: the figures would lie")
        dense_figures = dense(args, work, kvlog)

    median = {name: statistics.median(runs) for name, runs in seconds.items()}
    cpu = {name: statistics.median(runs) for name, runs in cpu_seconds.items()}
    rate = {name: lines / median[name] for name, (_run, lines) in variants.items()}
    rate["kvlog_net_of_startup"] = args.lines / (median["kvlog"] - median["kvlog_startup"])
    ratios = {
        "kvlog_over_sed": rate["kvlog"] / rate["sed"],
        "kvlog_over_mtail": rate["kvlog"] / rate["mtail"],
        "jobs2_two_files_over_one_file": rate["kvlog_jobs2_two_files"] / rate["kvlog_jobs1_one_file"],
    }
    parallelism = rate["sed_two_files_parallel"] / rate["sed_one_file_unpinned"]
    cpu_ratios = {"kvlog_over_sed": cpu["sed"] / cpu["kvlog"], "kvlog_over_mtail": cpu["mtail"] / cpu["kvlog"]}
    goals = {"kvlog_over_sed": 1.0, "kvlog_over_mtail": 5.0, "jobs2_two_files_over_one_file": 1.8}
    print(
        f"{args.lines} lines per file ({memory} memory lines), median of {args.rounds} rounds, "
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} -> {load[1]:.2f}"
    )
    print(f"{'variant':<24} {'wall s':>8} {'CPU s':>8} {'lines/s (wall)':>15}")
    for name in variants:
        print(f"{name:<24} {median[name]:>8.3f} {cpu[name]:>8.3f} {rate[name]:>15,.0f}")
    print(f"{'kvlog_net_of_startup':<24} {'':>17} {rate['kvlog_net_of_startup']:>15,.0f}  (kvlog minus kvlog_startup)")
    for name, value in ratios.items():
        verdict = "met" if value >= goals[name] else "MISSED"
        by_cpu = f", {cpu_ratios[name]:.2f}x by CPU seconds" if name in cpu_ratios else ""
        print(f"{name:<30} {value:6.2f}x by wall time{by_cpu}  (goal >= {goals[name]}x: {verdict})")
    print(f"{'control: 2 seds / 1 sed':<30} {parallelism:6.2f}x  (the parallelism the machine gave during this run)")
    report_dense(dense_figures, args.rounds)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    **about(args),
                    "lines": args.lines,
                    "memory_lines": memory,
                    "load_average": load,
                    "seconds": seconds,
                    "cpu_seconds": cpu_seconds,
                    "cpu_ratios": cpu_ratios,
                    "control_parallelism": parallelism,
                    "lines_per_second": rate,
                    "ratios": ratios,
                    "goals": goals,
                    "dense": dense_figures,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
