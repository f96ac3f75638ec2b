"""Migrating a fleet's logs on a Ray cluster: one node against two, ``--jobs`` as the baseline (issue 14).

``kvlog migrate ... --engine ray --ray-address ADDR`` is run as a user runs it (the console command in
a subprocess, wall time) on two clusters of raylets on loopback, started by this script with
``tests/fleet_helpers.Cluster`` and alive together: **ray1** a head only, **ray2** a head and a worker
node, every node ``--num-cpus 1``. The local engine runs the same inputs in the same rounds:
**jobs1** (``--jobs 1``, the named baseline of every ratio) and **jobs2**. Contenders take turns
(the order reversed every other round); medians over the rounds are reported.

Input sets (``bench_migrate.generate_dense``'s fleet log: request traffic and 1.5% memory events,
cut into per-rank files at line starts):

- **many**: ``--files`` files of ``--file-mib`` MiB, ``-o DIR`` (each node writes its outputs);
- **many-stdout**: the same files to standard output: every output byte comes back to the driver in
  4 MiB blocks through the object store and the driver writes them in input order;
- **large**: ``--large`` files of ``--large-mib`` MiB, ``-o DIR``;
- **tiny**: ``--tiny`` one-line files, ``-o DIR``, against **tiny-one**: the same lines in one file.
  ``(wall(tiny) - wall(tiny-one)) / (tiny - 1)`` is the overhead of a task (a file) on each engine,
  and wall(tiny-one) on a cluster less that of ``--jobs 1`` is the fixed cost of one Ray command.

Also timed: what connecting costs (``import ray``, ``ray.init(address)``, ``ray.shutdown``, in a fresh
interpreter, per cluster), and what the driver does per file into an output directory of many entries
(``remove_stale_temporaries``, which lists the directory for a killed node's temporaries).

CPU is reported for the command's processes: on a cluster the driver alone (the tasks run in the
nodes' Ray workers), with ``--jobs`` the driver and its worker processes. The load average is printed
per round: other jobs share the machine, and the ratios within a run are what count. ``--tree`` runs
a snapshot (``git archive HEAD | tar -x -C SNAPSHOT``) on the driver and in the Ray workers, so that
other people's edits to the working tree do not change the code measured halfway.

    .venv/bin/python benchmarks/bench_fleet.py [--rounds 3] [--files 300] [--file-mib 1] [--large 4]
        [--large-mib 64] [--tiny 300] [--sets many many-stdout large] [--tree SNAPSHOT] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bench_migrate import ROOT, generate_dense, kvlog_env

sys.path.insert(0, str(ROOT / "tests"))
from fleet_helpers import ENVIRONMENT, Cluster, ray_cluster

MIB = 1 << 20
LOCAL = ("jobs1", "jobs2")
ENGINES = (*LOCAL, "ray1", "ray2")
BASELINE = "jobs1"
SETS = ("many", "many-stdout", "large")
#: a fresh interpreter connecting to a cluster, each step timed: what every ``--engine ray`` command pays
CONNECT_PROBE = """
import json, logging, sys, time
t0 = time.perf_counter()
import ray
t1 = time.perf_counter()
ray.init(address=sys.argv[1], logging_level=logging.ERROR, log_to_driver=False, include_dashboard=False)
t2 = time.perf_counter()
cpus = ray.cluster_resources().get("CPU")
t3 = time.perf_counter()
kvlog = ray.get(ray.remote(lambda: __import__("kvlog").__file__).remote())  # which kvlog the tasks run
t4 = time.perf_counter()
ray.shutdown()
t5 = time.perf_counter()
times = {"import_s": t1 - t0, "init_s": t2 - t1, "resources_s": t3 - t2, "shutdown_s": t5 - t4, "task_s": t4 - t3}
print(json.dumps({**times, "cpus": cpus, "kvlog": kvlog}))
"""


@dataclass
class Sample:
    wall_s: float
    cpu_s: float
    output_bytes: int


@dataclass
class Workload:
    """One input set: its files, how its output is written, and its samples per engine."""

    name: str
    inputs: list[Path]
    to_stdout: bool
    samples: dict[str, list[Sample]] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return sum(path.stat().st_size for path in self.inputs)


def cut_files(source: bytes, directory: Path, count: int, size: int, prefix: str) -> list[Path]:
    """``count`` files of about ``size`` bytes of whole lines of ``source`` (repeated where it is shorter)."""
    directory.mkdir(parents=True)
    while len(source) < 2 * size:
        source *= 2
    made = []
    for index in range(count):
        start = (index * size) % (len(source) - size)
        start = source.index(b"\n", start) + 1 if start else 0
        piece = source[start : start + size]
        path = directory / f"{prefix}{index:05d}.log"
        path.write_bytes(piece[: piece.rfind(b"\n") + 1])
        made.append(path)
    return made


def output_size(target: Path) -> int:
    if target.is_dir():
        return sum(path.stat().st_size for path in target.iterdir())
    return target.stat().st_size if target.exists() else 0


def timed(command: list[str], output: Path, to_stdout: bool, env: dict[str, str]) -> Sample:
    """One run of ``command``: wall, the command's CPU, and how many bytes it wrote."""
    shutil.rmtree(output, ignore_errors=True)
    output.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with (output if to_stdout else Path(os.devnull)).open("wb") as sink:
        start = time.perf_counter()
        done = subprocess.run(
            command, stdout=sink, stderr=subprocess.PIPE, env=env, cwd=env["KVLOG_BENCH_TREE"], check=False
        )
        wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Sample(wall, cpu, output_size(output))


def connect_cost(cluster: Cluster, env: dict[str, str]) -> dict[str, float]:
    """The steps of a fresh interpreter's connection to ``cluster``, and its whole wall time."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CONNECT_PROBE, cluster.address],
        capture_output=True,
        env=env,
        cwd=env["KVLOG_BENCH_TREE"],
        check=True,
    )
    process = time.perf_counter() - start
    figures = json.loads(done.stdout.decode().strip().splitlines()[-1])
    if not figures.pop("kvlog").startswith(env["KVLOG_BENCH_TREE"]):
        raise SystemExit(f"the cluster's tasks do not import kvlog from {env['KVLOG_BENCH_TREE']}")
    return {**figures, "process_s": process}


def stale_scan_cost(work: Path, sizes: list[int]) -> dict[int, float]:
    """Seconds the driver's per-file ``remove_stale_temporaries`` takes in a directory of ``size`` outputs."""
    from kvlog.io.outputs import remove_stale_temporaries  # noqa: PLC0415 - kvlog is only run as a command above

    costs = {}
    for size in sizes:
        directory = work / f"outputs-{size}"
        directory.mkdir()
        for index in range(size):
            (directory / f"rank{index:07d}.log").touch()
        probes = [directory / f"rank{index:07d}.log" for index in range(0, size, max(1, size // 50))]
        start = time.perf_counter()
        for target in probes:
            remove_stale_temporaries(target)
        costs[size] = (time.perf_counter() - start) / len(probes)
        shutil.rmtree(directory)
    return costs


@contextmanager
def clusters(logs: Path, env: dict[str, str]) -> Iterator[dict[str, Cluster]]:
    """ray1 (a head) and ray2 (a head and a worker), both alive until the end, however it comes."""
    for name in ("ray1", "ray2"):
        (logs / name).mkdir(parents=True)
    with ExitStack() as stack:
        one = stack.enter_context(ray_cluster(logs / "ray1", workers=0, environment=env))
        two = stack.enter_context(ray_cluster(logs / "ray2", workers=1, environment=env))
        yield {"ray1": one, "ray2": two}


def engine_options(engine: str, started: dict[str, Cluster]) -> list[str]:
    if engine in LOCAL:
        return ["--jobs", engine.removeprefix("jobs")]
    return ["--engine", "ray", "--ray-address", started[engine].address]


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def median(samples: list[Sample], name: str) -> float:
    return statistics.median(getattr(sample, name) for sample in samples)


def report(workloads: list[Workload]) -> list[dict[str, object]]:
    """Print the table of medians and ratios; return the same figures for ``--json``."""
    figures: list[dict[str, object]] = []
    print("| input | engine | files | MiB | wall s | files/s | MiB/s | command CPU s | vs jobs1 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for workload in workloads:
        mib, files = workload.bytes / MIB, len(workload.inputs)
        base = median(workload.samples[BASELINE], "wall_s")
        for engine, samples in workload.samples.items():
            wall = median(samples, "wall_s")
            row = {
                "input": workload.name,
                "engine": engine,
                "files": files,
                "mib": round(mib, 1),
                "wall_s": wall,
                "walls_s": [sample.wall_s for sample in samples],
                "files_per_s": files / wall,
                "mib_per_s": mib / wall,
                "command_cpu_s": median(samples, "cpu_s"),
                "speed_vs_jobs1": base / wall,
            }
            figures.append(row)
            print(
                f"| {workload.name} | {engine} | {files} | {mib:.0f} | {wall:.2f} | {files / wall:.1f} | "
                f"{mib / wall:.1f} | {row['command_cpu_s']:.2f} | {base / wall:.2f}x |"
            )
    return figures


def task_overheads(workloads: dict[str, Workload]) -> dict[str, dict[str, float]]:
    """Per engine: seconds per task (file) beyond the same bytes in one file, and a command's fixed cost."""
    tiny, one = workloads["tiny"], workloads["tiny-one"]
    count = len(tiny.inputs)
    local_fixed = median(one.samples[BASELINE], "wall_s")
    overheads = {}
    print(
        "\n| engine | wall, tiny files | wall, same lines in one file | per task (wall) | per task (command CPU) |",
        end="",
    )
    print(" fixed vs jobs1 |\n| --- | ---: | ---: | ---: | ---: | ---: |")
    for engine in tiny.samples:
        many_wall, one_wall = median(tiny.samples[engine], "wall_s"), median(one.samples[engine], "wall_s")
        per_task = (many_wall - one_wall) / (count - 1)
        cpu = (median(tiny.samples[engine], "cpu_s") - median(one.samples[engine], "cpu_s")) / (count - 1)
        overheads[engine] = {"per_task_s": per_task, "per_task_cpu_s": cpu, "fixed_s": one_wall - local_fixed}
        print(
            f"| {engine} | {many_wall:.2f} s | {one_wall:.2f} s | {per_task * 1e3:.2f} ms | {cpu * 1e3:.2f} ms | "
            f"{one_wall - local_fixed:+.2f} s |"
        )
    return overheads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is reported")
    parser.add_argument("--files", type=int, default=300, help="files of the 'many' set")
    parser.add_argument("--file-mib", type=float, default=1.0, help="size of each of them")
    parser.add_argument("--large", type=int, default=4, help="files of the 'large' set")
    parser.add_argument("--large-mib", type=float, default=64.0, help="size of each of them")
    parser.add_argument("--tiny", type=int, default=300, help="one-line files of the 'tiny' set")
    parser.add_argument(
        "--sets", nargs="+", choices=SETS, default=SETS, help="input sets besides tiny and tiny-one (always run)"
    )
    parser.add_argument(
        "--directory-sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000], help="outputs in one directory"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument(
        "--tree", type=Path, help="run kvlog from this source tree (e.g. `git archive HEAD`), not the installed one"
    )
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the clusters are stopped on the way out
    kvlog = [sys.executable, "-m", "kvlog", "migrate"]
    with tempfile.TemporaryDirectory(prefix="bench_fleet-", dir=args.dir) as tmp:
        work = Path(tmp)
        # the nodes' Ray workers inherit it: the driver and the tasks run the same kvlog
        # Ray puts the driver's working directory first on its tasks' path: the commands run in the tree
        tree = str((args.tree or ROOT).resolve())
        env = {**ENVIRONMENT, **kvlog_env(args.tree, work / "bytecode"), "KVLOG_BENCH_TREE": tree}
        env["RAY_agent_register_timeout_ms"] = "180000"  # a loaded machine: a raylet waits for its agents
        dense = work / "dense.log"
        generate_dense(dense, work / "plain.log", 500_000, seed=14)
        (work / "plain.log").unlink()
        source = dense.read_bytes()
        dense.unlink()
        many = cut_files(source, work / "many", args.files, int(args.file_mib * MIB), "rank")
        line = source[: source.index(b"\n") + 1]
        tiny = []
        (work / "tiny").mkdir()
        for index in range(args.tiny):
            tiny.append(work / "tiny" / f"rank{index:05d}.log")
            tiny[-1].write_bytes(line)
        (work / "tiny-one.log").write_bytes(line * args.tiny)
        workloads = [
            Workload("many", many, to_stdout=False),
            Workload("many-stdout", many, to_stdout=True),
            Workload("large", cut_files(source, work / "large", args.large, int(args.large_mib * MIB), "big"), False),
            Workload("tiny", tiny, to_stdout=False),
            Workload("tiny-one", [work / "tiny-one.log"], to_stdout=False),
        ]
        workloads = [workload for workload in workloads if workload.name in (*args.sets, "tiny", "tiny-one")]
        del source
        print(f"load average before: {load()}", flush=True)
        connects: dict[str, list[dict[str, float]]] = {"ray1": [], "ray2": []}
        loads = []
        with clusters(work / "nodes", env) as started:
            runs = [(workload, engine) for workload in workloads for engine in ENGINES]
            for engine in ENGINES:  # untimed: bytecode compiled, each cluster's first job behind it
                warm_up = [*kvlog, str(workloads[-1].inputs[0]), *engine_options(engine, started)]
                timed([*warm_up, "-o", str(work / "out.log")], work / "out.log", False, env)
            for round_number in range(args.rounds):
                for workload, engine in runs if round_number % 2 == 0 else reversed(runs):
                    output = work / "out" if workload.to_stdout or len(workload.inputs) > 1 else work / "out.log"
                    command = [*kvlog, *map(str, workload.inputs), *engine_options(engine, started)]
                    if not workload.to_stdout:
                        command += ["-o", str(output)]
                    sample = timed(command, output, workload.to_stdout, env)
                    workload.samples.setdefault(engine, []).append(sample)
                    first = workload.samples[BASELINE][0].output_bytes if BASELINE in workload.samples else None
                    if first is not None and sample.output_bytes != first:
                        raise SystemExit(
                            f"{workload.name} on {engine}: {sample.output_bytes} bytes, jobs1 wrote {first}"
                        )
                for name, cluster in started.items():
                    connects[name].append(connect_cost(cluster, env))
                loads.append(load())
                print(f"round {round_number + 1}/{args.rounds} done, load average {loads[-1]}", flush=True)
        print(f"load average after: {load()}\n")
        figures = report(workloads)
        overheads = task_overheads({workload.name: workload for workload in workloads})
        print("\n| cluster | import ray | ray.init | cluster_resources | one task | ray.shutdown | whole process |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        connect = {}
        for name, probes in connects.items():
            connect[name] = {key: statistics.median(probe[key] for probe in probes) for key in probes[0]}
            steps = ("import_s", "init_s", "resources_s", "task_s", "shutdown_s", "process_s")
            print(f"| {name} | " + " | ".join(f"{connect[name][key]:.3f} s" for key in steps) + " |")
        scans = stale_scan_cost(work, args.directory_sizes)
        print("\n| outputs in the directory | driver's stale-temporary scan per file |")
        print("| ---: | ---: |")
        for size, seconds in scans.items():
            print(f"| {size:,} | {seconds * 1e3:.3f} ms |")
    if args.json:
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        args.json.write_text(
            json.dumps(
                {
                    "date": stamp,
                    "machine": f"{platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
                    "rounds": args.rounds,
                    "loads": loads,
                    "figures": figures,
                    "task_overheads": overheads,
                    "connect": connect,
                    "stale_scan_s": scans,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
