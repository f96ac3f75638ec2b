"""Events validated per second: ``kvlog validate`` against plain jsonschema and bare ``orjson.loads``.

Generates a JSON-lines log of N events (default 1,000,000) in a realistic mix of the catalog's
current events (arena commits and decommits dominate, as in a server that grows and shrinks its
pools; every line is valid), then measures, in one run on the same file:

* ``orjson.loads`` of every line: the floor, parsing alone;
* kvlog's validation loop in-process, one core (``kvlog.file_validation.check_lines``);
* the ``kvlog validate`` command end to end (a subprocess: start-up, reading, output), serial
  (``--jobs 1``) and with its default (all CPUs for a file this size);
* plain ``jsonschema`` (``Draft202012Validator`` with the same schemas and registry, dispatched by
  event and version, after ``orjson.loads``) on the first ``--reference-events`` lines, because at
  its speed the whole file would take minutes; its rate is per event, so it compares directly.

plus a process that only reads the file and parses every line (``read + orjson.loads``), the floor of
any command that validates it: ``kvlog validate --jobs 1``'s CPU time over that process's is the
one-core ratio (goal: at most 1.5x), and the default run's events per second the parallel figure
(goal: at least 1.2 M on two cores). Each timed run starts when the machine is idle
(``benchmarks/quiet.py``); the measurements take turns, ``--repeat`` rounds, and medians are reported.

With ``--baseline TREE`` (a checkout, e.g. ``git worktree add /tmp/base COMMIT``) that tree's CLI runs
take turns with this one's, and their ratios are printed.

``--engines`` measures only issue 34's goal (``kvlog validate`` at most 1.0x bare ``orjson.loads``): the
native path against ``KVLOG_NATIVE=0`` against the bare-parsing process, each pinned (``taskset -c 0``),
in turns, on this mix and on a held-out-style log (``generate_held_out``: every event version, random
figures).

Usage: ``.venv/bin/python benchmarks/bench_validate.py [--events N] [--reference-events M] [--baseline TREE]``
or ``... --engines [--events N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from quiet import wait_for_idle

from kvlog.file_validation import Counts, available_cpus, validate_lines
from kvlog.schema.catalog import default_catalog
from kvlog.schema.event_validator import EventValidator

GIB = 1 << 30
MIB = 1 << 20
ROOT = Path(__file__).resolve().parent.parent

#: (weight, builder) — builders return an event's own fields from a random source
Builder = Callable[[random.Random], dict[str, Any]]


def _commit(verb: str) -> Builder:
    def build(rng: random.Random) -> dict[str, Any]:
        nbytes = rng.randrange(1, 512) * 2 * MIB
        measured = rng.choice([None, nbytes * rng.randrange(1, 64)])
        fields: dict[str, Any] = {
            "event": f"kv_arena.{verb}",
            "schema_version": 1,
            "arena_id": f"{rng.randrange(1000, 99999)}_{rng.randrange(4)}",
            "offset_bytes": rng.randrange(0, 4096) * 2 * MIB,
            "nbytes": nbytes,
            "requested_nbytes": nbytes - rng.randrange(0, 2 * MIB),
            "committed_bytes": nbytes * rng.randrange(1, 64),
            "measured_committed_bytes": measured,
            "duration_us": round(rng.uniform(20, 5000), 1),
        }
        if measured is not None:
            fields["measurement_source"] = rng.choice(["cuMemGetInfo", "smaps_rss", "nvml"])
        return fields

    return build


def _allocation(rng: random.Random) -> dict[str, Any]:
    tokens = rng.randrange(1, 1 << 20)
    layout = rng.choice(["mha", "mha", "mla"])
    sizes = {"k_bytes": tokens * 4096, "v_bytes": tokens * 4096} if layout == "mha" else {"kv_bytes": tokens * 1152}
    return {
        "event": "kv_pool.allocation",
        "schema_version": 2,
        "pool": "MHATokenToKVPool" if layout == "mha" else "MLATokenToKVPool",
        "label": rng.choice([None, "Full", "SWA"]),
        "layout": layout,
        "allocation_state": rng.choice(["va_upper_bound", "allocated"]),
        "dtype": rng.choice(["torch.bfloat16", "torch.float8_e4m3fn"]),
        "num_tokens": tokens,
        **sizes,
        "committed_bytes": rng.choice([None, 0, tokens * 8192]),
    }


MIX: list[tuple[int, Builder]] = [
    (30, _commit("commit")),
    (20, _commit("decommit")),
    (14, _allocation),
    (
        5,
        lambda rng: {
            "event": "kv_arena.ready",
            "schema_version": 2,
            "arena_id": f"{rng.randrange(1000, 99999)}_0",
            "backend": rng.choice(["cuda", "host"]),
            "device": rng.choice([0, 1, None]),
            "reserved_va_bytes": rng.randrange(1, 80) * GIB,
            "granularity_bytes": 2 * MIB,
            "handle_type": rng.choice(["posix_fd", None]),
        },
    ),
    (
        5,
        lambda rng: {
            "event": "kv_pool.swa_summary",
            "schema_version": 2,
            "allocation_state": "va_upper_bound",
            "total_bytes": rng.randrange(1, 1 << 40),
            "swa_tokens": rng.randrange(1, 1 << 20),
            "full_tokens": rng.randrange(1, 1 << 20),
        },
    ),
    (
        5,
        lambda rng: {
            "event": "kv_pool.post_capture_sized",
            "schema_version": 1,
            "max_total_num_tokens": rng.randrange(1, 1 << 21),
            "free_bytes": rng.randrange(1, 80) * GIB,
            "budget_bytes": rng.choice([None, rng.randrange(1, 80) * GIB]),
            "committed_bytes": rng.choice([None, rng.randrange(1, 80) * GIB]),
        },
    ),
    (
        5,
        lambda rng: {
            "event": "kv_host_pool.allocation",
            "schema_version": 1,
            "label": "kv",
            "num_tokens": rng.randrange(1, 1 << 22),
            "host_bytes": rng.randrange(1, 1 << 40),
        },
    ),
    (5, lambda rng: {"event": "kv_memory.pool_end", "schema_version": 1, "avail_bytes": rng.randrange(1 << 36)}),
    (
        4,
        lambda rng: {
            "event": "mamba_pool.allocation",
            "schema_version": 1,
            "label": None,
            "max_mamba_cache_size": rng.randrange(1, 1024),
            "conv_state_bytes": rng.randrange(1 << 32),
            "ssm_state_bytes": rng.randrange(1 << 34),
        },
    ),
    (
        4,
        lambda rng: {
            "event": "kv_arena.closed",
            "schema_version": 1,
            "arena_id": f"{rng.randrange(1000, 99999)}_0",
            "released_bytes": rng.randrange(1 << 36),
        },
    ),
    (
        3,
        lambda rng: {
            "event": "kv_arena.error",
            "schema_version": 1,
            "arena_id": f"{rng.randrange(1000, 99999)}_0",
            "operation": "commit",
            "offset_bytes": rng.randrange(1 << 36),
            "nbytes": rng.randrange(1 << 36),
            "error": "CUDA_ERROR_OUT_OF_MEMORY",
            "committed_bytes": rng.randrange(1 << 36),
        },
    ),
]


def generate(path: Path, events: int, seed: int = 2026) -> int:
    """Write ``events`` valid events to ``path``; return its size in bytes."""
    rng = random.Random(seed)
    builders = [builder for weight, builder in MIX for _ in range(weight)]
    start = 1_764_662_400.0  # 2025-12-02T08:00:00Z
    with path.open("wb") as out:
        for number in range(events):
            fields = rng.choice(builders)(rng)
            now = start + number * 0.001
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"
            envelope = {"level": "info", "pid": 4242, "ranks": {"tp": number % 8, "dp": 0}, "timestamp": stamp}
            out.write(orjson.dumps({**fields, **envelope}, option=orjson.OPT_APPEND_NEWLINE))
    return path.stat().st_size


def generate_held_out(path: Path, events: int, seed: int = 34) -> int:
    """Write ``events`` valid events of every catalog event version, with random figures; return its size.

    Not the bench's mix: each line is a sample of ``tests/foundation_samples`` (one per event version,
    so conditional schemas, nested provenance and every version of the envelope appear), its integers
    redrawn at random within 64 bits and its timestamps and ranks varied, as a log the table was not
    tuned on.
    """
    sys.path.insert(0, str(ROOT / "tests"))
    from foundation_samples import sample  # noqa: PLC0415 - the tests' samples, only for this corpus

    catalog = default_catalog()
    samples = [sample(event, version) for event in catalog.events() for version in catalog.versions(event)]
    rng = random.Random(seed)

    def redraw(value: Any) -> Any:
        if type(value) is int and value > 1:
            return rng.randrange(1, 1 << rng.choice([8, 20, 34, 40, 63]))
        if isinstance(value, dict):
            return {key: item if key == "schema_version" else redraw(item) for key, item in value.items()}
        return value

    with path.open("wb") as out:
        for number in range(events):
            event = redraw(rng.choice(samples))
            event["timestamp"] = (
                f"2026-12-07T{number // 3600000 % 24:02d}:{number // 60000 % 60:02d}:00.{number % 1000:03d}Z"
            )
            event["ranks"] = {"tp": number % 8, "dp": number % 2}
            out.write(orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE))
    return path.stat().st_size


def engines(path: Path, rounds: int) -> dict[str, float]:
    """Median CPU seconds, pinned (``taskset -c 0``), of the native path, the Python one and bare parsing."""
    pin = ["taskset", "-c", "0"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONSAFEPATH": "1"}
    validate = [*pin, sys.executable, "-m", "kvlog", "validate", "--jobs", "1", str(path)]
    commands = {
        "native": (validate, {**env, "KVLOG_NATIVE": "1"}),
        "python": (validate, {**env, "KVLOG_NATIVE": "0"}),
        "bare": ([*pin, sys.executable, "-c", BARE_PARSE, str(path)], None),
    }
    runs: dict[str, list[float]] = {what: [] for what in commands}
    for _ in range(rounds):
        for what, (command, environment) in commands.items():
            runs[what].append(bench_process(command, environment)[1])
    return {what: statistics.median(samples) for what, samples in runs.items()}


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds / 1e6:.3f} M events/s ({seconds / count * 1e6:.3f} us/event)"


def bench_orjson(lines: list[bytes]) -> float:
    loads = orjson.loads
    start = time.perf_counter()
    for line in lines:
        loads(line)
    return time.perf_counter() - start


def bench_kvlog_loop(lines: list[bytes]) -> float:
    validator = EventValidator()
    summary = Counts()
    start = time.perf_counter()
    problems = list(validate_lines("bench", lines, summary, validator))
    elapsed = time.perf_counter() - start
    assert not problems and summary.events == len(lines), "the generated log must be valid"
    return elapsed


def bench_jsonschema(lines: list[bytes]) -> float:
    catalog = default_catalog()
    validators = {
        (event, version): Draft202012Validator(catalog.schema(event, version), registry=catalog.registry)
        for event in catalog.events()
        for version in catalog.versions(event)
    }
    loads = orjson.loads
    start = time.perf_counter()
    for line in lines:
        event = loads(line)
        if not validators[event["event"], event["schema_version"]].is_valid(event):
            raise AssertionError("the generated log must be valid")
    return time.perf_counter() - start


#: a program that reads the file and parses every line, nothing else: the floor of any command that validates it
BARE_PARSE = "import sys, orjson\nwith open(sys.argv[1], 'rb') as f:\n    for line in f: orjson.loads(line)"


def bench_cli(path: Path, *args: str, tree: Path | None = None) -> tuple[float, float]:
    """Wall-clock and CPU seconds (user + system, the command and its workers) of one ``kvlog validate`` run.

    ``tree``: run the kvlog of that source tree (a baseline checkout) instead of this one.
    """
    # PYTHONSAFEPATH: ``python -m`` would put the working directory first on the path, ahead of ``tree``
    env = {**os.environ, "PYTHONPATH": str(tree or ROOT), "PYTHONSAFEPATH": "1"}
    return bench_process([sys.executable, "-m", "kvlog", "validate", *args, str(path)], env)


def bench_process(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall-clock and CPU seconds (user + system, with its children) of one command run to its end."""
    wait_for_idle()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert result.returncode == 0, result.stdout[:2000] + result.stderr
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def in_process(measure: Callable[[list[bytes]], float], lines: list[bytes]) -> tuple[float, float]:
    """An in-process measurement, as (seconds, seconds): wall and CPU are the same loop on one core."""
    wait_for_idle()
    seconds = measure(lines)
    return seconds, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--reference-events", type=int, default=50_000, help="lines given to plain jsonschema")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds; medians are reported")
    parser.add_argument("--baseline", type=Path, help="a kvlog source tree whose CLI runs take turns with this one's")
    parser.add_argument(
        "--engines",
        action="store_true",
        help="only the engines, pinned: native, KVLOG_NATIVE=0 and bare parsing, on this mix and a held-out one",
    )
    args = parser.parse_args()
    if args.engines:
        compare_engines(args.events, args.repeat)
        return

    with tempfile.TemporaryDirectory(prefix="kvlog-bench-") as tmp:
        path = Path(tmp) / "events.jsonl"
        size = generate(path, args.events)
        lines = path.read_bytes().splitlines(keepends=True)
        n = len(lines)
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(
            f"file: {n} events, {size / MIB:.1f} MiB; CPUs available: {available_cpus()}; "
            f"python {sys.version.split()[0]}"
        )
        # every measurement once a round, in turn, so that load from other jobs falls on all of them alike
        measures: dict[str, Callable[[], tuple[float, float]]] = {
            "orjson": lambda: in_process(bench_orjson, lines),
            "loop": lambda: in_process(bench_kvlog_loop, lines),
            "bare": lambda: bench_process([sys.executable, "-c", BARE_PARSE, str(path)]),
            "serial": lambda: bench_cli(path, "--jobs", "1"),
            "default": lambda: bench_cli(path),
        }
        if args.baseline:
            measures["serial_base"] = lambda: bench_cli(path, "--jobs", "1", tree=args.baseline)
            measures["default_base"] = lambda: bench_cli(path, tree=args.baseline)
        runs: dict[str, list[tuple[float, float]]] = {what: [] for what in measures}
        for _ in range(args.repeat):
            for what, measure in measures.items():
                runs[what].append(measure())
        wall = {what: statistics.median(run[0] for run in samples) for what, samples in runs.items()}
        cpu = {what: statistics.median(run[1] for run in samples) for what, samples in runs.items()}
        reference = lines[: args.reference_events]
        t_reference = bench_jsonschema(reference)
        per_ref = t_reference / len(reference)
        jobs = available_cpus()

        print(f"medians of {args.repeat} interleaved rounds")
        print(f"orjson.loads only, in-process, 1 core          {rate(n, wall['orjson'])}")
        print(f"kvlog validate_lines, in-process, 1 core       {rate(n, wall['loop'])}")
        print(f"read + orjson.loads (a process, 1 core)        {rate(n, wall['bare'])}; CPU {cpu['bare']:.2f} s")
        print(f"kvlog validate --jobs 1 (CLI, end to end)      {rate(n, wall['serial'])}; CPU {cpu['serial']:.2f} s")
        print(
            f"kvlog validate (CLI, default jobs={jobs})          {rate(n, wall['default'])}; CPU {cpu['default']:.2f} s"
        )
        reference_rate = f"{rate(len(reference), t_reference)}, first {len(reference)} lines"
        print(f"jsonschema Draft202012Validator, 1 core        {reference_rate}")
        if args.baseline:
            for what in ("serial", "default"):
                base = f"{what}_base"
                print(
                    f"baseline {what:<7} {rate(n, wall[base])}; CPU {cpu[base]:.2f} s; this tree / baseline: "
                    f"wall {wall[what] / wall[base]:.2f}, CPU {cpu[what] / cpu[base]:.2f}; "
                    f"CPU / bare parsing {cpu[base] / cpu['bare']:.2f}x"
                )
        print()
        one_core = cpu["serial"] / cpu["bare"]
        print(f"kvlog validate_lines / orjson.loads (1 core):  {wall['loop'] / wall['orjson']:.2f}x the time")
        print(f"kvlog validate --jobs 1 / read + orjson.loads: {one_core:.2f}x the CPU time (goal <= 1.5x)")
        print(f"kvlog validate (default) vs jsonschema:        {per_ref / (wall['default'] / n):.1f}x faster")
        events_per_s = n / wall["default"]
        print(f"kvlog validate (default), events/s:            {events_per_s / 1e6:.3f} M (goal >= 1.2 M on 2 cores)")
        print(
            f"goals: 1 core {'met' if one_core <= 1.5 else 'NOT met'}, {jobs} cores "
            f"{'met' if events_per_s >= 1.2e6 else 'NOT met'}"
        )


def compare_engines(events: int, rounds: int) -> None:
    """``--engines``: issue 34's goal, validate at most 1.0x bare ``orjson.loads``, on both corpora."""
    with tempfile.TemporaryDirectory(prefix="kvlog-bench-") as tmp:
        for corpus, make in (("bench mix", generate), ("held-out style", generate_held_out)):
            path = Path(tmp) / "events.jsonl"
            size = make(path, events)
            cpu = engines(path, rounds)
            print(
                f"{corpus}: {events} events, {size / MIB:.1f} MiB; CPU s, median of {rounds}, pinned: "
                f"native {cpu['native']:.2f}, KVLOG_NATIVE=0 {cpu['python']:.2f}, bare parsing {cpu['bare']:.2f}; "
                f"native / bare {cpu['native'] / cpu['bare']:.2f}x (goal <= 1.0x), "
                f"Python / bare {cpu['python'] / cpu['bare']:.2f}x, "
                f"native / Python {cpu['native'] / cpu['python']:.2f}x"
            )
            path.unlink()


if __name__ == "__main__":
    main()
