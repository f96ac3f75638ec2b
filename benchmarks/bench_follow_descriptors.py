"""``kvlog follow`` over 10x more files than its descriptor limit, against the same files with room for all.

A directory of old rotations or a log per restart may hold more files than ``RLIMIT_NOFILE``: the
follower then holds at most its budget open (the limit less what is open and a headroom) and opens a
closed file again when it changes. This measures what that costs: ``kvlog follow DIR -o OUT`` as a
subprocess, from its start until every event of every file is in ``OUT`` (the output checked at the
end), then one line appended to every file and the time until all their events are written too.

- **baseline**: ``ulimit -n`` large enough for every file to stay open (``2 x files + 256``);
- **10x the limit**: ``ulimit -n`` = files / 10, so nine files in ten are closed at any moment.

Both rounds interleaved, median reported; the logs are ``bench_migrate``'s generated server log
(``--lines`` lines each, with its memory lines, closed as ``bench_follow``'s is so that no event waits for a
later line) copied to every file. Files live in ``--dir``
(default ``/dev/shm``). Speed is never asserted in tests; this prints a Markdown table (and ``--json``).

    .venv/bin/python benchmarks/bench_follow_descriptors.py [--limit 256] [--lines 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_follow import CLOSING, count_lines, machine
from bench_migrate import generate

from kvlog import commands

#: ``-P``: ``python -m`` would put the working directory first on the path, so a run started from a
#: checkout would import that checkout's kvlog whatever ``PYTHONPATH`` names (see bench_migrate.kvlog_env)
KVLOG = [sys.executable, "-P", "-m", "kvlog"]
#: one more memory line per file, appended once every file is caught up
APPENDED = "[2026-07-30 00:00:00 TP0] Load weight begin. avail mem=139.06 GB\n"


def wait_lines(path: Path, count: int, process: subprocess.Popen[bytes], timeout_s: float) -> float:
    """Seconds until ``path`` holds ``count`` lines (polled every 5 ms); exits if the follower dies or stalls."""
    start = time.perf_counter()
    while not path.exists() or count_lines(path) < count:
        if process.poll() is not None:
            raise SystemExit(f"kvlog follow exited {process.returncode}: {process.communicate()[1].decode()[-2000:]}")
        if time.perf_counter() - start > timeout_s:
            raise SystemExit(f"kvlog follow wrote {count_lines(path)} of {count} events in {timeout_s:.0f} s")
        time.sleep(0.005)
    return time.perf_counter() - start


def one_round(template: Path, logs: Path, files: int, limit: int, expected: tuple[int, int]) -> dict[str, float]:
    """A follower of ``files`` fresh copies of ``template`` under ``ulimit -n limit``: seconds to all their events.

    Then one line is appended to every file, and timed until its events are written too (``expected``:
    how many events of the copies, and of the appended lines).
    """
    events, appended = expected
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()
    for number in range(files):
        shutil.copyfile(template, logs / f"server-{number:05}.log")
    out = logs.with_name("events.jsonl")
    out.unlink(missing_ok=True)
    process = subprocess.Popen(
        [*KVLOG, "follow", str(logs), "-o", str(out)],
        stderr=subprocess.PIPE,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)),  # noqa: PLW1509
    )
    try:
        start = time.perf_counter()
        wait_lines(out, events, process, 600)
        caught_up = time.perf_counter() - start
        for log in logs.iterdir():
            with log.open("a") as stream:
                stream.write(APPENDED)
        again = wait_lines(out, events + appended, process, 600)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    if process.returncode != 0 or count_lines(out) != events + appended:
        raise SystemExit(
            f"kvlog follow: exit {process.returncode}, {count_lines(out)} events: {stderr.decode()[-2000:]}"
        )
    return {"all_events_s": caught_up, "appended_s": again}


def measure(directory: Path, limit: int, lines: int, rounds: int) -> dict[str, Any]:
    files = limit * 10
    logs = directory / "logs"
    template = directory / "template.log"
    generate(template, lines, seed=1)
    with template.open("a") as stream:
        stream.write(CLOSING)  # nothing waits for a later line: migrate's count is what a follower reaches
    migrated = directory / "template.jsonl"
    commands.migrate(template, output=migrated, only_events=True)
    per_file = count_lines(migrated)
    with_line = directory / "appended.log"
    shutil.copyfile(template, with_line)
    with with_line.open("a") as stream:
        stream.write(APPENDED)
    commands.migrate(with_line, output=migrated, only_events=True)
    appended_per_file = count_lines(migrated) - per_file
    variants = {"baseline (all open)": 2 * files + 256, "10x the limit": limit}
    seconds: dict[str, dict[str, list[float]]] = {name: {"all_events_s": [], "appended_s": []} for name in variants}
    for _ in range(rounds):
        for name, nofile in variants.items():
            expected = (per_file * files, appended_per_file * files)
            for figure, value in one_round(template, logs, files, nofile, expected).items():
                seconds[name][figure].append(value)
    medians = {
        name: {figure: statistics.median(values) for figure, values in by.items()} for name, by in seconds.items()
    }
    base = medians["baseline (all open)"]
    return {
        "files": files,
        "limit": limit,
        "lines_per_file": lines,
        "events": per_file * files,
        "appended_events": appended_per_file * files,
        "nofile": variants,
        "seconds": seconds,
        "median_s": medians,
        "over_baseline": {
            name: {figure: value / base[figure] for figure, value in by.items()} for name, by in medians.items()
        },
    }


def report(figures: dict[str, Any]) -> None:
    print(f"- {figures['date']}; {figures['machine']}")
    print(f"- `{figures['command']}`")
    put = figures["descriptors"]
    print(
        f"\n{put['files']:,} files of {put['lines_per_file']} lines ({put['events']:,} events, then "
        f"{put['appended_events']:,} appended), median of {len(put['seconds']['10x the limit']['all_events_s'])}\n"
    )
    print("| variant | `ulimit -n` | all events, s | vs baseline | one line appended to each, s | vs baseline |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, medians in put["median_s"].items():
        ratio = put["over_baseline"][name]
        print(
            f"| {name} | {put['nofile'][name]} | {medians['all_events_s']:.3f} | {ratio['all_events_s']:.2f}x | "
            f"{medians['appended_s']:.3f} | {ratio['appended_s']:.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=256, help="the descriptor limit; 10x as many files (default 256)")
    parser.add_argument("--lines", type=int, default=200, help="lines of each generated log (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=options.dir) as scratch:
        figures = {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(),
            "command": " ".join(["python", *sys.argv]),
            "descriptors": measure(Path(scratch), options.limit, options.lines, options.rounds),
        }
    report(figures)
    if options.json:
        options.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
