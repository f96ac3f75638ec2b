"""``scripts/mutation``: arguments, the run of each module in scope, the report and the exit status.

Exit status: 0 when the run finished (whatever the score), 1 when a baseline failed, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import UTC, datetime
from pathlib import Path

from mutation_tool import processes, report, workspace
from mutation_tool.baseline import Baseline, BaselineError, run_baseline
from mutation_tool.config import Config, ConfigError, load
from mutation_tool.mutants import Mutant, find_mutants
from mutation_tool.running import EQUIVALENT, Result, Worker, choose_tests, run_mutant

USAGE_ERROR, BASELINE_FAILED = 2, 1


class UsageError(Exception):
    """The command line asks for something the tool cannot do."""


def parser() -> argparse.ArgumentParser:
    """The command line."""
    tool = Path(__file__).resolve().parent.parent
    arguments = argparse.ArgumentParser(
        prog=os.environ.get("MUTATION_PROG", "scripts/mutation"),
        description="Mutation testing of the modules in scope (scripts/mutation.toml): one small edit per "
        "mutant, each run against the tests whose coverage reaches it.",
    )
    arguments.add_argument(
        "modules", nargs="*", metavar="MODULE", help="a module in scope, e.g. kvlog/file_validation.py"
    )
    arguments.add_argument("--changed", metavar="BASE", help="the modules in scope that differ from git BASE")
    arguments.add_argument("--sample", type=int, metavar="N", help="a seeded sample of N mutants per module")
    arguments.add_argument("--seed", default="0", metavar="S", help="the seed of --sample (default 0)")
    arguments.add_argument("--jobs", type=int, default=1, metavar="N", help="mutants run at once (default 1)")
    arguments.add_argument(
        "--timeout-factor",
        type=float,
        default=3.0,
        metavar="F",
        help="a mutant's time limit: F x (its tests' baseline time + pytest's start-up), at least "
        "timeout_min of the configuration (default F=3)",
    )
    arguments.add_argument("--markdown", type=Path, metavar="FILE", help="also write the table (date, command) here")
    arguments.add_argument("--root", type=Path, default=tool.parent, help="the project root (default: this repo)")
    arguments.add_argument("--config", type=Path, help="the configuration (default: ROOT/scripts/mutation.toml)")
    arguments.add_argument(
        "--equivalents", action="store_true", help="print the mutants judged equivalent (markdown) and stop"
    )
    return arguments


def main(argv: Sequence[str] | None = None) -> int:
    """Run the tool; the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    options = parser().parse_args(argv)
    try:
        root = options.root.resolve()
        config = load(options.config or root / "scripts" / "mutation.toml")
        modules = _modules(options, root, config)
        if options.sample is not None and options.sample < 1:
            raise UsageError("--sample needs a positive number")
        if options.jobs < 1:
            raise UsageError("--jobs needs a positive number")
    except (UsageError, ConfigError) as error:
        print(f"{parser().prog}: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    if options.equivalents:
        print(report.equivalents_markdown(config), end="")
        return 0
    if not modules:
        print(f"no module in scope differs from {options.changed}: nothing to mutate")
        return 0
    signal.signal(signal.SIGTERM, _interrupt)  # `timeout` and CI stop with SIGTERM: clean up as for Ctrl-C
    command = shlex.join([parser().prog, *argv])
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    try:
        results = _run(options, root, config, modules)
    except BaselineError as error:
        print(f"baseline failed: {error}", file=sys.stderr)
        return BASELINE_FAILED
    except KeyboardInterrupt:
        processes.kill_all()
        print("interrupted", file=sys.stderr)
        return 130
    table = report.rows(modules, results)
    print(report.text_table(table))
    survived = report.survivors(results)
    if survived:
        print("\nsurvivors (key, then the edit):")
        print(survived)
    if options.markdown:
        options.markdown.write_text(report.markdown(table, results, config, when, command))
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _modules(options: argparse.Namespace, root: Path, config: Config) -> list[str]:
    in_scope = list(config.selections)
    if options.changed and options.modules:
        raise UsageError("name MODULEs or --changed BASE, not both")
    if options.changed:
        try:
            changed = subprocess.run(
                ["git", "diff", "--name-only", options.changed, "--"],
                cwd=root,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
        except (OSError, subprocess.CalledProcessError) as error:
            detail = getattr(error, "stderr", "") or error
            raise UsageError(f"git diff --name-only {options.changed} failed: {detail}".strip()) from error
        return [module for module in in_scope if module in changed]
    if not options.modules:
        return in_scope
    chosen = []
    for name in options.modules:
        path = Path(name)
        try:
            module = (path.resolve().relative_to(root) if path.is_absolute() or path.exists() else path).as_posix()
        except ValueError:
            module = name
        if module not in config.selections:
            listed = "\n  ".join(in_scope)
            raise UsageError(f"{name} is not in scope; the modules in scope are:\n  {listed}")
        chosen.append(module)
    return list(dict.fromkeys(chosen))


def _run(options: argparse.Namespace, root: Path, config: Config, modules: list[str]) -> list[Result]:
    originals = {module: (root / module).read_bytes() for module in modules}
    every = {module: find_mutants(module, originals[module]) for module in modules}
    found = {mutant.key for mutants in every.values() for mutant in mutants}
    for entry in config.equivalents:
        if entry.key.split("::")[0] in modules and entry.key not in found:
            print(f"warning: [[equivalent]] {entry.key} matches no mutant (the line changed?)", file=sys.stderr)
    chosen = {module: _sample(every[module], options.sample, f"{options.seed}:{module}") for module in modules}
    with tempfile.TemporaryDirectory(prefix="mutation-") as scratch_dir:
        scratch = Path(scratch_dir)
        plugins = workspace.install_plugins(scratch / "plugins")
        workers = []
        for index in range(options.jobs):
            tree = workspace.copy_project(root, scratch / f"tree{index}")
            workers.append(Worker(tree, scratch / f"worker{index}", plugins))
            workers[-1].scratch.mkdir()
        baselines = _baselines(workers[0], config, root, modules, scratch)
        return _mutate(
            options, config, modules=modules, chosen=chosen, originals=originals, baselines=baselines, workers=workers
        )


def _sample(mutants: list[Mutant], size: int | None, seed: str) -> list[Mutant]:
    """``size`` of the mutants, ranked by a hash of the seed and their key.

    The same seed picks the same sample on every run, and an unrelated edit of the module (which keeps the
    other keys) leaves the rest of the sample as it was.
    """
    if size is None or size >= len(mutants):
        return mutants
    rank = sorted(mutants, key=lambda mutant: hashlib.sha256(f"{seed}\0{mutant.key}".encode()).hexdigest())
    picked = {mutant.key for mutant in rank[:size]}
    return [mutant for mutant in mutants if mutant.key in picked]


def _baselines(
    worker: Worker, config: Config, root: Path, modules: list[str], scratch: Path
) -> dict[str, tuple[Baseline, Path]]:
    """One baseline per distinct selection (modules that share their tests share one run)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for module in modules:
        groups.setdefault(config.test_files(root, module), []).append(module)
    by_module: dict[str, tuple[Baseline, Path]] = {}
    for index, (tests, members) in enumerate(groups.items()):
        where = scratch / f"baseline{index}"
        if not tests:
            print(f"baseline: {', '.join(members)}: no test file matches the selection", file=sys.stderr)
            baseline = Baseline(tests=())
            where.mkdir()
        else:
            print(f"baseline: {', '.join(members)}: {len(tests)} test file(s) ...", file=sys.stderr, flush=True)
            baseline = run_baseline(
                worker.tree,
                worker.plugins,
                scratch=where,
                modules=members,
                tests=tests,
                timeout=config.baseline_timeout,
            )
            print(
                f"baseline: {len(baseline.durations)} tests green in {baseline.seconds:.1f} s "
                f"({len(baseline.subprocess_tests)} start a subprocess)",
                file=sys.stderr,
                flush=True,
            )
        known = where / "known.txt"
        known.write_text("".join(f"{node}\n" for node in baseline.durations))
        for module in members:
            by_module[module] = (baseline, known)
    return by_module


def _mutate(
    options: argparse.Namespace,
    config: Config,
    *,
    modules: list[str],
    chosen: dict[str, list[Mutant]],
    originals: dict[str, bytes],
    baselines: dict[str, tuple[Baseline, Path]],
    workers: list[Worker],
) -> list[Result]:
    mutants = [mutant for module in modules for mutant in chosen[module]]
    total, done = len(mutants), [0]
    lock = threading.Lock()
    free = list(workers)

    def progress(result: Result) -> Result:
        with lock:
            done[0] += 1
            timing = f" {result.seconds:.1f}s {result.tests} tests" if result.tests else ""
            note = f" ({result.note})" if result.note else ""
            print(
                f"[{done[0]}/{total}] {result.mutant.module} {result.status}{timing} {result.mutant.key}{note}",
                file=sys.stderr,
                flush=True,
            )
        return result

    def one(mutant: Mutant) -> Result:
        if config.equivalent(mutant.key) is not None:
            return progress(Result(mutant, EQUIVALENT))
        baseline, known = baselines[mutant.module]
        tests = choose_tests(mutant, baseline)
        with lock:
            worker = free.pop()
        try:
            result = run_mutant(
                worker,
                mutant,
                original=originals[mutant.module],
                tests=tests,
                baseline=baseline,
                known=known,
                factor=options.timeout_factor,
                timeout_min=config.timeout_min,
            )
        finally:
            with lock:
                free.append(worker)
        return progress(result)

    results: dict[str, Result] = {}
    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        futures = [pool.submit(one, mutant) for mutant in mutants]
        try:
            for future in as_completed(futures):
                result = future.result()
                results[result.mutant.key] = result
        except BaseException:
            for future in futures:
                future.cancel()
            processes.kill_all()
            raise
    return [results[mutant.key] for mutant in mutants]
