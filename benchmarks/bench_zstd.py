"""Reading compressed logs: ``kvlog migrate`` and ``kvlog validate`` on the same log as ``.zst`` and as ``.gz``.

The goal (issue 9): a ``.zst`` input costs at most 2x the same log as ``.gz`` (the reader it replaced
was quadratic: 64 MiB took 23-42 s as ``.zst`` against 0.3-0.8 s as ``.gz``). For each size, two
logs are generated: an old sglang server log for ``migrate`` (``bench_migrate.generate``, rewritten
to a plain file with ``-o``) and a log of valid events for ``validate --jobs 1``
(``bench_validate.generate``); each is compressed with gzip level 6 and zstd level 3 (the command
line tools' defaults) and also read plain, for reference. Commands are pinned to one core
(``taskset -c 0``), rounds interleave the variants, and the median round is reported as wall time
and as CPU seconds of the child (which barely moves when other work shares the machine). The
ratio is ``.zst`` over ``.gz``, per command and size, in CPU seconds.

    .venv/bin/python benchmarks/bench_zstd.py [--sizes 64 128] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import zstandard
from bench_migrate import PIN, timed
from bench_migrate import generate as generate_server_log
from bench_validate import generate as generate_events

MIB = 1 << 20
SUFFIXES = ("", ".gz", ".zst")


def cut(source: Path, target: Path, size: int) -> None:
    """``target``: the whole lines of ``source`` that fit in ``size`` bytes."""
    with source.open("rb") as stream:
        data = stream.read(size)
    target.write_bytes(data[: data.rfind(b"\n") + 1])


def compressed(plain: Path) -> None:
    """Write ``plain``.gz and ``plain``.zst beside it."""
    data = plain.read_bytes()
    plain.with_name(plain.name + ".gz").write_bytes(gzip.compress(data, compresslevel=6, mtime=0))
    plain.with_name(plain.name + ".zst").write_bytes(zstandard.ZstdCompressor(level=3).compress(data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128], help="log sizes in MiB")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    args = parser.parse_args()
    pin = PIN if shutil.which(PIN[0]) else []
    kvlog = [*pin, sys.executable, "-m", "kvlog"]
    largest = max(args.sizes) * MIB
    with tempfile.TemporaryDirectory(prefix="bench_zstd-", dir=args.dir) as tmp:
        work = Path(tmp)
        server, events = work / "server-full.log", work / "events-full.jsonl"
        generate_server_log(server, largest // 100, seed=1)  # lines average ~120 bytes: more than enough
        generate_events(events, largest // 250)  # events average ~290 bytes
        commands: dict[tuple[str, int, str], list[str]] = {}
        for size in args.sizes:
            log, jsonl = work / f"server-{size}.log", work / f"events-{size}.jsonl"
            cut(server, log, size * MIB)
            cut(events, jsonl, size * MIB)
            for plain in (log, jsonl):
                compressed(plain)
            for suffix in SUFFIXES:
                output = work / f"migrated-{size}{suffix}.log"
                commands["migrate", size, suffix] = [*kvlog, "migrate", f"{log}{suffix}", "-o", str(output)]
                commands["validate", size, suffix] = [*kvlog, "validate", "--jobs", "1", f"{jsonl}{suffix}"]
        server.unlink()
        events.unlink()
        samples: dict[tuple[str, int, str], list[tuple[float, float]]] = {key: [] for key in commands}
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        for round_number in range(args.rounds):
            for key, command in commands.items():
                samples[key].append(timed(command, work / "stdout"))
            print(f"round {round_number + 1}/{args.rounds} done", flush=True)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    figures = []
    print("| command | size | input | wall (median) | CPU (median) | CPU vs .gz |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    for verb, size, suffix in sorted(samples, key=lambda key: (key[0], key[1], SUFFIXES.index(key[2]))):
        runs = samples[verb, size, suffix]
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        gz = statistics.median(c for _, c in samples[verb, size, ".gz"])
        figures.append({"command": verb, "mib": size, "input": suffix or "plain", "wall_s": wall, "cpu_s": cpu})
        print(f"| {verb} | {size} MiB | {suffix or 'plain'} | {wall:.2f} s | {cpu:.2f} s | {cpu / gz:.2f}x |")
    if args.json:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        args.json.write_text(json.dumps({"date": stamp, "rounds": args.rounds, "figures": figures}, indent=2))


if __name__ == "__main__":
    main()
