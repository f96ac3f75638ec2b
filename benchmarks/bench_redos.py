"""Regular-expression denial of service: `kvlog migrate` on single lines of 1, 10 and 50 MB built to hurt.

Each hostile line sits near a wording the grammar reads (long digit runs after `#tokens: `, repeated
`0_` after `KvVmmArena[`, nested brackets in the prefix, thousands of rank tags, a size list that
never ends, a JSON-looking line of braces), so a backtracking expression would go quadratic or worse.
Every file holds the same number of bytes (fifty 1 MB lines, five 10 MB lines, one 50 MB line), so
that fixed costs weigh the same in each; it is migrated by the real command (`kvlog migrate FILE -o
OUT` through its click entry point, in this process so that interpreter start-up is not timed; best of
--repeat runs; files on tmpfs so the disk is not measured). Lines over the engine's cap are copied
unread, so a second table does the same with lines of 1 KB, 8 KB and just under the cap, which the
grammar does read. Printed: wall and CPU seconds, CPU time per byte (CPU, since machines are shared)
and its ratio to the smallest line of the same kind, the baseline of the same run. Acceptance: every
ratio within 2x.

    .venv/bin/python benchmarks/bench_redos.py [--sizes 1,10,50] [--repeat 3] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kvlog.cli import main as main_command
from kvlog.migration.candidates import MAX_LINE_BYTES

MB = 1 << 20
HOSTILE: dict[str, Callable[[int], bytes]] = {
    "digits after #tokens": lambda n: b"KV Cache is allocated. #tokens: " + b"9" * n,
    "digits, then a size": lambda n: b"KV Cache is allocated. #tokens: " + b"9" * n + b", K size: 1.00 GB",
    "0_ after KvVmmArena[": lambda n: b"KvVmmArena[" + b"0_" * (n // 2) + b"] ready: device=0",
    "nested brackets": lambda n: b"[2025-06-03 11:20:41 " + b"[" * (n // 2) + b"]" * (n // 2) + b" KV Cache",
    "rank tags": lambda n: b"[2025-06-03 11:20:41" + b" TP1" * (n // 4) + b"] Memory pool end. avail mem=1.0 GB",
    "repeated sizes": lambda n: b"SWAKVPool mem usage: " + b"1.00 GB, " * (n // 9),
    "braces": lambda n: b"{" * n + b'"schema_version"',
}


def migrate_seconds(path: Path, repeat: int) -> tuple[float, float]:
    """Best wall and best CPU seconds (this process: user + system) of ``kvlog migrate path -o out``."""
    out = Path(str(path) + ".out")
    wall = cpu = float("inf")
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        with contextlib.redirect_stderr(io.StringIO()):
            main_command(["migrate", str(path), "-o", str(out)], standalone_mode=False)
        wall = min(wall, time.perf_counter() - started)
        cpu = min(cpu, time.process_time() - started_cpu)
        if out.read_bytes() != path.read_bytes():
            raise SystemExit(f"{path.name}: a hostile line did not pass through unchanged")
    return wall, cpu


def table(title: str, sizes: list[int], unit: int, total: int, directory: Path, repeat: int) -> float:
    """One row per kind and size; returns the worst CPU-time-per-byte ratio to the first size."""
    print(f"\n## {title}: each file {total >> 20} MB of copies of one line")
    print(f"{'line':24} {'size':>8} {'lines':>6} {'wall s':>7} {'cpu s':>7} {'cpu ns/B':>8} {'vs 1st':>7}")
    worst = 0.0
    for name, build in HOSTILE.items():
        baseline = None
        for size in sizes:
            path = directory / "hostile.log"
            line = build(size * unit) + b"\n"
            lines = max(1, total // len(line))
            path.write_bytes(line * lines)
            wall, cpu = migrate_seconds(path, repeat)
            per_byte = cpu / path.stat().st_size
            baseline = baseline or per_byte
            worst = max(worst, per_byte / baseline)
            label = f"{size} {'MB' if unit == MB else 'KB'}"
            print(
                f"{name:24} {label:>8} {lines:>6} {wall:>7.3f} {cpu:>7.3f} {per_byte * 1e9:>8.2f}"
                f" {per_byte / baseline:>6.2f}x"
            )
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,50", help="line sizes in MB; the first is the baseline")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", default="/dev/shm" if Path("/dev/shm").is_dir() else None)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, {platform.machine()}, ", end="")
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, python {platform.python_version()}")
    print(f"# lines over the engine's cap ({MAX_LINE_BYTES} bytes) are copied unread; shorter ones are parsed")
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        directory = Path(name)
        copied = table("Lines of megabytes", sizes, MB, max(sizes) * MB, directory, args.repeat)
        kib = MAX_LINE_BYTES // 1024 - 1
        parsed = table("Lines under the cap", [1, 8, kib], 1024, 16 * MB, directory, args.repeat)
    print(f"\nworst CPU time per byte vs the 1 MB lines: {copied:.2f}x; vs the 1 KB lines: {parsed:.2f}x (at most 2x)")
    if max(copied, parsed) > 2:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
