"""``kvlog check`` on kvlog's own catalog: this tree against a baseline tree, in one run.

The compatibility verdict is the rule that does real work per schema pair; a catalog check in CI
must not get slower when that verdict gets stronger. Each round runs, interleaved, both trees'
``kvlog check`` in a subprocess pinned to one core, on each tree's own catalog (the same schemas):

- ``check``: the default run, as a pre-commit hook or CI runs it;
- ``check_against_root``: ``--against <the first commit> --mode full_transitive``, so every version
  added since is compared with every older one in both directions (the most compatibility work).

It reports the median CPU seconds of each and their ratio (this tree / baseline: below 1 is faster),
and the ratio of the fastest runs, which a shared machine's noise disturbs least.
Modules load from their bytecode cache, as from an installed wheel (a first run writes it).

Usage (the baseline is any checkout, e.g. a worktree of the commit before the change)::

    git worktree add /tmp/kvlog-base 9e62365
    .venv/bin/python benchmarks/bench_check.py --baseline /tmp/kvlog-base [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds(tree: Path, args: list[str]) -> float:
    """CPU seconds (user + system) of one ``kvlog check`` of ``tree``'s catalog, run from ``tree``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    # as installed: modules come from their bytecode cache, not compiled again on every run
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPATH": str(tree)}
    command = [sys.executable, "-c", "from kvlog.cli import main; main()", "check", *args]
    pinned = ["taskset", "-c", "0", *command] if sys.platform == "linux" else command
    result = subprocess.run(pinned, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if result.returncode not in (0, 1) or "kvlog check:" not in result.stdout + result.stderr:
        raise SystemExit(f"{tree}: kvlog check failed ({result.returncode}): {result.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a source tree of the commit to compare with")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    root_commit = subprocess.run(
        ["git", "rev-list", "--max-parents=0", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()[0]
    cases = {"check": [], "check_against_root": ["--against", root_commit, "--mode", "full_transitive"]}
    times: dict[tuple[str, str], list[float]] = {}
    for tree in (ROOT, options.baseline.resolve()):  # warm-up: writes each tree's bytecode cache
        cpu_seconds(tree, [])
    for _ in range(options.rounds):
        for case, args in cases.items():
            for label, tree in (("this", ROOT), ("baseline", options.baseline.resolve())):
                times.setdefault((case, label), []).append(cpu_seconds(tree, args))
    print(f"{'case':<22} {'this (s)':>10} {'baseline (s)':>13} {'ratio':>7} {'ratio of minima':>16}")
    for case in cases:
        mine, theirs = statistics.median(times[case, "this"]), statistics.median(times[case, "baseline"])
        fastest = min(times[case, "this"]) / min(times[case, "baseline"])
        print(f"{case:<22} {mine:>10.3f} {theirs:>13.3f} {mine / theirs:>7.3f} {fastest:>16.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
