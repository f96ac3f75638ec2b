"""The copies of the project the tool works in, and the environment of every pytest it starts.

Each worker owns one copy of the project tree. A mutant is written in place in the copy and pytest runs
with the copy as its working directory and first on ``PYTHONPATH``: in-process imports, the ``kvlog``
pytest plugin (an entry point that imports ``kvlog``), and subprocesses such as ``python -m kvlog``,
which inherit the environment, all import the mutant, since ``PYTHONPATH`` precedes the editable
install's ``.pth`` path. ``.venv`` is linked, not copied; ``.git`` is copied (tests may ask git).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

#: not copied: caches and build outputs (``__pycache__`` at any depth, the rest at the top)
_SKIPPED_TOP = {".venv", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".import_linter_cache", "build", "dist"}
_SKIPPED_ANYWHERE = {"__pycache__"}
#: variables of the calling environment that would change how the child pytest runs
_DROPPED = (
    "PYTHONPATH",
    "PYTEST_ADDOPTS",
    "PYTEST_PLUGINS",
    "PYTEST_CURRENT_TEST",
    "COVERAGE_PROCESS_START",
    "COVERAGE_PROCESS_CONFIG",
    "COVERAGE_FILE",
    "COVERAGE_RCFILE",
    "MUTATION_PROG",
)


def copy_project(root: Path, destination: Path) -> Path:
    """A copy of the project at ``root`` in ``destination`` (``.venv`` linked to the original)."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = {name for name in names if name in _SKIPPED_ANYWHERE}
        if Path(directory) == root:
            skipped |= {name for name in names if name in _SKIPPED_TOP}
        return skipped

    shutil.copytree(root, destination, ignore=ignore, symlinks=True)
    if (root / ".venv").exists():
        (destination / ".venv").symlink_to(root / ".venv")
    return destination


def environment(tree: Path, plugins: Path, **extra: str) -> dict[str, str]:
    """The environment of a pytest run in ``tree``, with the tool's plugins importable from ``plugins``."""
    env = {name: value for name, value in os.environ.items() if name not in _DROPPED}
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(plugins)])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def install_plugins(directory: Path) -> Path:
    """The tool's pytest plugins, copied to ``directory`` under names no project uses."""
    directory.mkdir(parents=True, exist_ok=True)
    here = Path(__file__).parent
    shutil.copyfile(here / "probe.py", directory / "_mutation_probe.py")
    shutil.copyfile(here / "select.py", directory / "_mutation_select.py")
    return directory


def drop_bytecode(tree: Path, module: str) -> None:
    """Delete the module's cached bytecode in ``tree``: a same-size, same-second mutation would reuse it."""
    path = tree / module
    for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        cached.unlink(missing_ok=True)
