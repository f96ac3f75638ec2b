"""``kvlog follow``: lines per second against ``kvlog migrate``, delay to ``/metrics``, and CPU while idle.

Three measurements, each against a baseline timed in the same run:

- **throughput**: ``bench_migrate``'s generated sglang server log (request traffic, a server start
  every 250k lines), closed by a ``server_args=`` line and one ``Load weight begin`` so that no event
  is left waiting for a later line (a run's end releases them): the count ``kvlog migrate`` gives is
  then the count a follower reaches once it has read the whole file. ``migrate`` is the library's
  ``kvlog.commands.migrate(only_events=True)`` to ``/dev/null``; ``follow`` is
  ``kvlog.commands.follow`` in a thread with a ``stop`` event, timed from its start until an
  observer has seen every expected event (it is then stopped, and the events in its output file
  checked): on the complete file with inotify, with ``--poll 0.5``, and with the file appended in
  pieces (as fast as the writer can) while it runs. Both in-process, after a warm-up, so
  interpreter start-up is in neither; ``follow_startup`` (a two-line log) is the cost of starting.
- **latency**: ``kvlog follow LOG -o OUT --metrics-port 0`` (a subprocess); a ``Memory pool end.
  avail mem=XX.XX GB`` line with a new value is appended, and ``/metrics`` is fetched every 1 ms
  until ``kvlog_memory_avail_bytes{stage="kv_memory.pool_end"}`` shows it. Appends are spaced by a
  random 50-350 ms so that they fall anywhere in the follower's tick. Baseline: ``--poll 0.5``.
- **idle CPU**: the followers of 8 small idle log files, all started together, for ``--idle-s``
  seconds after a settling time: user + system CPU from ``/proc/PID/stat`` and context switches (the
  wake-ups) summed over ``/proc/PID/task/*/status``. Baselines: ``tail -F`` (inotify) and
  ``tail -F ---disable-inotify -s 0.5`` (polling) on the same files.

Files live in ``--dir`` (default ``/dev/shm``). Speed is never asserted in tests; this prints a
Markdown table (and ``--json``).

    .venv/bin/python benchmarks/bench_follow.py [--lines 1000000] [--rounds 3] [--samples 30] [--idle-s 30]
    .venv/bin/python benchmarks/bench_follow.py --quick   # a smoke run in about a minute
    .venv/bin/python benchmarks/bench_follow.py --profile # where a follower's catch-up spends its time
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_migrate import generate

from kvlog import commands

ROOT = Path(__file__).resolve().parent.parent
#: ends every run of the generated log, so that nothing waits for a later line at its end
CLOSING = (
    "[2026-07-30 00:00:00] server_args=ServerArgs(model_path='openai/gpt-oss-120b', tp_size=2)\n"
    "[2026-07-30 00:00:00 TP0] Load weight begin. avail mem=139.06 GB\n"
)
POOL_END = "[2026-07-21 09:00:00 TP0] Memory pool end. avail mem={gib:.2f} GB\n"
AVAIL = re.compile(rb'^kvlog_memory_avail_bytes\{[^}]*stage="kv_memory\.pool_end"[^}]*\} (\S+)$', re.MULTILINE)
#: ``-P``: ``python -m`` would put the working directory first on the path, so a run started from a
#: checkout would import that checkout's kvlog whatever ``PYTHONPATH`` names (see bench_migrate.kvlog_env)
KVLOG = [sys.executable, "-P", "-m", "kvlog"]
IDLE_FILES = 8


# -- throughput -----------------------------------------------------------------------------------


class Counter:
    """An observer of the follower: notes when the expected number of events has been read."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen = 0
        self.done = threading.Event()
        self.at = 0.0

    def observe(self, event: Mapping[str, Any], *, instance: str) -> None:
        self.seen += 1
        if self.seen == self.expected:
            self.at = time.perf_counter()
            self.done.set()

    def count_unparsed(self, lines: int, *, instance: str) -> None:
        pass

    def count_violations(self, count: int, *, instance: str) -> None:
        pass


def count_lines(path: Path) -> int:
    with path.open("rb") as stream:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: stream.read(1 << 20), b""))


def build_log(path: Path, lines: int, seed: int) -> int:
    """The generated server log and its closing lines; returns its line count."""
    generate(path, lines, seed)
    with path.open("a") as out:
        out.write(CLOSING)
    return lines + CLOSING.count("\n")


def time_migrate(log: Path, output: str) -> float:
    start = time.perf_counter()
    commands.migrate(log, output=output, only_events=True)
    return time.perf_counter() - start


def time_follow(
    log: Path,
    output: Path,
    expected: int,
    *,
    poll_s: float | None = None,
    feed: Callable[[], None] | None = None,
    timeout_s: float = 900.0,
) -> tuple[float, float]:
    """Seconds from the follower's start (or from ``feed``'s, when given) until it has read ``expected`` events.

    Returns that and, with ``feed``, how long the writer took. ``feed`` starts once the follower has
    made its first pass over the (then empty) file.
    """
    output.unlink(missing_ok=True)
    counter, stop, failure = Counter(expected), threading.Event(), []

    def run() -> None:
        try:
            commands.follow(log, output=output, stop=stop, poll_s=poll_s, observers=[counter])
        except Exception as exc:  # noqa: BLE001 - reported by the caller
            failure.append(exc)
            counter.done.set()

    thread = threading.Thread(target=run, name="follow")
    written = 0.0
    start = time.perf_counter()
    thread.start()
    if feed is not None:
        while not output.exists():  # the follower opens its output before its first pass
            time.sleep(0.001)
        time.sleep(0.2)
        start = time.perf_counter()
        feed()
        written = time.perf_counter() - start
    finished = counter.done.wait(timeout_s)
    stop.set()
    thread.join()
    if failure:
        raise SystemExit(f"kvlog follow failed: {failure[0]!r}")
    if not finished:
        raise SystemExit(f"kvlog follow read {counter.seen} of {expected} events in {timeout_s:.0f} s")
    if count_lines(output) != expected:
        raise SystemExit(f"kvlog follow wrote {count_lines(output)} events for {expected}: the figures would lie")
    return counter.at - start, written


def appender(source: bytes, log: Path, piece: int) -> Callable[[], None]:
    """A writer that appends ``source`` to ``log`` in pieces of about ``piece`` bytes, cut after a newline."""

    def feed() -> None:
        descriptor = os.open(log, os.O_WRONLY | os.O_APPEND)
        try:
            at = 0
            while at < len(source):
                end = source.find(b"\n", min(at + piece, len(source)) - 1) + 1 or len(source)
                os.write(descriptor, source[at:end])
                at = end
        finally:
            os.close(descriptor)

    return feed


def throughput(logs: Path, out: Path, lines: int, rounds: int, pieces: list[int]) -> dict[str, Any]:
    log, tiny = logs / "server.log", logs / "tiny.log"
    total = build_log(log, lines, seed=1)
    tiny.write_text(CLOSING)
    events_file = out / "migrate.jsonl"
    time_migrate(log, str(events_file))  # warm-up, and the count every follower must reach
    expected = count_lines(events_file)
    content = log.read_bytes()
    growing = logs / "growing.log"
    variants: dict[str, tuple[Callable[[], float], int]] = {
        "migrate": (lambda: time_migrate(log, os.devnull), total),
        "follow_startup": (lambda: time_follow(tiny, out / "tiny.out", 1)[0], 0),
        "follow_complete_inotify": (lambda: time_follow(log, out / "follow.out", expected)[0], total),
        "follow_complete_poll_0.5": (lambda: time_follow(log, out / "poll.out", expected, poll_s=0.5)[0], total),
    }
    writer_seconds: dict[str, list[float]] = {}

    def appending(piece: int, name: str) -> float:
        growing.write_bytes(b"")
        seconds, written = time_follow(growing, out / "growing.out", expected, feed=appender(content, growing, piece))
        writer_seconds.setdefault(name, []).append(written)
        return seconds

    for piece in pieces:
        name = f"follow_appended_{piece >> 20}MiB_pieces_inotify"
        variants[name] = (lambda piece=piece, name=name: appending(piece, name), total)
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, (run, _lines) in variants.items():
            seconds[name].append(run())
    median = {name: statistics.median(runs) for name, runs in seconds.items()}
    rate = {name: count / median[name] for name, (_run, count) in variants.items() if count}
    net = {
        name: total / (median[name] - median["follow_startup"])
        for name in variants
        if name.startswith("follow_complete")
    }
    return {
        "lines": total,
        "bytes": len(content),
        "events": expected,
        "seconds": seconds,
        "median_s": median,
        "lines_per_s": rate,
        "follow_over_migrate": {name: value / rate["migrate"] for name, value in rate.items()},
        "lines_per_s_net_of_startup": net,
        "net_follow_over_migrate": {name: value / rate["migrate"] for name, value in net.items()},
        "writer_seconds": {name: statistics.median(runs) for name, runs in writer_seconds.items()},
    }


def profile(logs: Path, out: Path, lines: int) -> None:
    """cProfile of one catch-up of ``follow`` on the complete log, then of ``migrate`` on it (top functions)."""
    log = logs / "server.log"
    build_log(log, lines, seed=1)
    events_file = out / "migrate.jsonl"
    time_migrate(log, str(events_file))
    expected = count_lines(events_file)
    profiler = cProfile.Profile()
    counter, stop = Counter(expected), threading.Event()

    def run() -> None:
        profiler.enable()
        commands.follow(log, output=out / "follow.out", stop=stop, observers=[counter])
        profiler.disable()

    thread = threading.Thread(target=run)
    thread.start()
    counter.done.wait()
    stop.set()
    thread.join()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
    profiler = cProfile.Profile()
    profiler.runcall(commands.migrate, log, output=os.devnull, only_events=True)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


# -- latency to /metrics --------------------------------------------------------------------------


def start_follower(arguments: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """``kvlog follow`` with ``--metrics-port 0``, and the URL it says it serves."""
    process = subprocess.Popen([*KVLOG, "follow", *arguments, "--metrics-port", "0"], stderr=subprocess.PIPE)
    assert process.stderr is not None
    for raw in process.stderr:
        line = raw.decode()
        if "serving metrics at " in line:
            threading.Thread(target=process.stderr.read, daemon=True).start()  # keep the pipe drained
            return process, line.split("serving metrics at ", 1)[1].strip()
    raise SystemExit(f"kvlog follow stopped before serving metrics (exit {process.wait()})")


def scrape(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read()


def shows(url: str, gib: float) -> bool:
    match = AVAIL.search(scrape(url))
    return match is not None and abs(float(match.group(1)) - gib * (1 << 30)) < 1 << 20


def stop_process(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def latency(logs: Path, out: Path, samples: int, poll_s: float | None, seed: int) -> dict[str, Any]:
    """Delays from appending a line to seeing its value at ``/metrics``, in seconds."""
    log = logs / f"latency-{poll_s}.log"
    log.write_text(POOL_END.format(gib=60.0))
    extra = [] if poll_s is None else ["--poll", str(poll_s)]
    process, url = start_follower([str(log), "-o", str(out / f"latency-{poll_s}.out"), *extra])
    rng = random.Random(seed)
    delays: list[float] = []
    scrapes: list[float] = []
    try:
        deadline = time.monotonic() + 10
        while not shows(url, 60.0):
            if time.monotonic() > deadline:
                raise SystemExit(f"{url} never showed the first value")
            time.sleep(0.01)
        descriptor = os.open(log, os.O_WRONLY | os.O_APPEND)
        for index in range(samples):
            gib = 70.0 + index * 0.01
            time.sleep(rng.uniform(0.05, 0.35))
            start = time.perf_counter()
            os.write(descriptor, POOL_END.format(gib=gib).encode())
            while True:
                before = time.perf_counter()
                seen = shows(url, gib)
                scrapes.append(time.perf_counter() - before)
                if seen:
                    delays.append(time.perf_counter() - start)
                    break
                if before - start > 10:
                    raise SystemExit(f"avail mem={gib:.2f} GB did not reach {url} in 10 s")
                time.sleep(0.001)
        os.close(descriptor)
    finally:
        stop_process(process)
    return {"delays_s": delays, "scrape_s": statistics.median(scrapes)}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


# -- idle CPU -------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def switches(pid: int) -> int:
    """Context switches of all the process's threads: how often it woke."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:
            continue  # a thread that ended
        total += sum(int(line.split()[1]) for line in status.splitlines() if "ctxt_switches:" in line)
    return total


def idle(logs: Path, out: Path, idle_s: float, settle_s: float) -> dict[str, dict[str, float]]:
    folder = logs / "idle"
    folder.mkdir()
    files = [folder / f"server-{index}.log" for index in range(IDLE_FILES)]
    for index, path in enumerate(files):
        build_log(path, 2000, seed=index)
    names = [str(path) for path in files]
    follow = [*KVLOG, "follow", *names]
    variants = {
        "tail -F (inotify)": ["tail", "-q", "-F", *names],
        "tail -F ---disable-inotify -s 0.5": ["tail", "-q", "-F", "---disable-inotify", "-s", "0.5", *names],
        "kvlog follow (inotify)": [*follow, "-o", str(out / "idle-1.out")],
        "kvlog follow --poll 0.5": [*follow, "-o", str(out / "idle-2.out"), "--poll", "0.5"],
        "kvlog follow --metrics-port 0 (inotify)": [*follow, "-o", str(out / "idle-3.out"), "--metrics-port", "0"],
        "kvlog follow --poll 0.5 --metrics-port 0": [
            *follow,
            "-o",
            str(out / "idle-4.out"),
            "--poll",
            "0.5",
            "--metrics-port",
            "0",
        ],
    }
    processes = {
        name: subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for name, command in variants.items()
    }
    try:
        time.sleep(settle_s)
        for name, process in processes.items():
            if process.poll() is not None:
                raise SystemExit(f"{name} stopped (exit {process.returncode})")
        before = {name: (cpu_seconds(p.pid), switches(p.pid), time.perf_counter()) for name, p in processes.items()}
        time.sleep(idle_s)
        after = {name: (cpu_seconds(p.pid), switches(p.pid), time.perf_counter()) for name, p in processes.items()}
    finally:
        for process in processes.values():
            stop_process(process)
    result = {}
    for name in variants:
        (cpu0, woke0, at0), (cpu1, woke1, at1) = before[name], after[name]
        result[name] = {
            "cpu_s": cpu1 - cpu0,
            "seconds": at1 - at0,
            "cpu_s_per_min": (cpu1 - cpu0) * 60 / (at1 - at0),
            "switches_per_s": (woke1 - woke0) / (at1 - at0),
        }
    return result


# -- report ---------------------------------------------------------------------------------------


def machine() -> str:
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    return (
        f"{platform.node()}, {os.cpu_count()} CPUs, Linux {platform.release()}, Python {platform.python_version()}, "
        f"kvlog at {commit.stdout.strip()}, load average {os.getloadavg()[0]:.2f}"
    )


def report(figures: dict[str, Any]) -> None:
    print(f"- {figures['date']}; {figures['machine']}")
    print(f"- `{figures['command']}`")
    if "throughput" in figures:
        report_throughput(figures["throughput"])
    if "latency" in figures:
        report_latency(figures["latency"])
    if "idle" in figures:
        report_idle(figures["idle"])


def report_throughput(put: dict[str, Any]) -> None:
    print(
        f"\nThroughput: {put['lines']:,} lines ({put['bytes'] / 1e6:.0f} MB, {put['events']} events), "
        f"median of {len(put['seconds']['migrate'])}\n"
    )
    print("| variant | median s | lines/s | vs migrate | net of start-up: lines/s | vs migrate |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, seconds in put["median_s"].items():
        rate, net = put["lines_per_s"].get(name), put["lines_per_s_net_of_startup"].get(name)
        cells = ["", ""] if rate is None else [f"{rate:,.0f}", f"{put['follow_over_migrate'][name]:.3f}x"]
        cells += ["", ""] if net is None else [f"{net:,.0f}", f"{put['net_follow_over_migrate'][name]:.3f}x"]
        print(f"| {name} | {seconds:.3f} | {' | '.join(cells)} |")
    for name, seconds in put["writer_seconds"].items():
        print(f"\n{name}: the writer was done after {seconds:.3f} s (median)")


def report_latency(latencies: dict[str, Any]) -> None:
    print("\nLatency, line appended to value at /metrics (ms)\n")
    print("| variant | samples | median | p90 | max | vs --poll 0.5 (median) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    base = statistics.median(latencies["--poll 0.5"]["delays_s"])
    for name, values in latencies.items():
        delays = values["delays_s"]
        middle = statistics.median(delays)
        print(
            f"| {name} | {len(delays)} | {middle * 1e3:.1f} | {percentile(delays, 0.9) * 1e3:.1f} | "
            f"{max(delays) * 1e3:.1f} | {middle / base:.3f}x |"
        )
    scrape_ms = ", ".join(f"{name} {values['scrape_s'] * 1e3:.2f} ms" for name, values in latencies.items())
    print(f"\nOne scrape (median): {scrape_ms}")


def report_idle(idle_figures: dict[str, Any]) -> None:
    first = next(iter(idle_figures.values()))
    print(f"\nIdle, {IDLE_FILES} files, {first['seconds']:.1f} s\n")
    print("| process | CPU s | CPU s per minute | context switches/s |")
    print("| --- | ---: | ---: | ---: |")
    for name, values in idle_figures.items():
        print(f"| {name} | {values['cpu_s']:.2f} | {values['cpu_s_per_min']:.3f} | {values['switches_per_s']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000, help="lines of the generated log (default 1M)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved throughput rounds; the median is reported")
    parser.add_argument("--pieces", type=int, nargs="+", default=[1, 16], help="appended piece sizes in MiB")
    parser.add_argument("--samples", type=int, default=30, help="latency samples per variant")
    parser.add_argument("--idle-s", type=float, default=30.0, help="seconds the idle followers are watched")
    parser.add_argument("--settle-s", type=float, default=5.0, help="seconds after start before the idle watch")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 100k lines, 1 round, 5 samples, 5 s idle")
    parser.add_argument("--only", choices=["throughput", "latency", "idle"], help="run one measurement")
    parser.add_argument("--profile", action="store_true", help="cProfile one follow catch-up and one migrate, and stop")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    args = parser.parse_args()
    if args.quick:
        args.lines, args.rounds, args.samples, args.idle_s, args.settle_s = 100_000, 1, 5, 5.0, 3.0
    figures: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="minutes"),
        "machine": machine(),
        "command": " ".join(["python", *sys.argv]),
    }
    with tempfile.TemporaryDirectory(prefix="bench_follow-", dir=args.dir) as tmp:
        # events go to another directory than the logs: a follower's own writes would wake its inotify watch
        logs, out = Path(tmp) / "logs", Path(tmp) / "out"
        logs.mkdir()
        out.mkdir()
        if args.profile:
            profile(logs, out, args.lines)
            return
        if args.only in (None, "throughput"):
            figures["throughput"] = throughput(logs, out, args.lines, args.rounds, [p << 20 for p in args.pieces])
        if args.only in (None, "latency"):
            figures["latency"] = {
                "inotify": latency(logs, out, args.samples, None, seed=1),
                "--poll 0.5": latency(logs, out, args.samples, 0.5, seed=1),
            }
        if args.only in (None, "idle"):
            figures["idle"] = idle(logs, out, args.idle_s, args.settle_s)
    figures["load_average_after"] = os.getloadavg()[0]
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    report(figures)


if __name__ == "__main__":
    main()
