"""A copy of kvlog's migration files with one step broken, for the tests of what a broken chain does."""

from __future__ import annotations

import shutil
from pathlib import Path

SHIPPED = Path(__file__).resolve().parent.parent / "migrations"


def broken_migrations(directory: Path) -> Path:
    """``directory/migrations``: kvlog's migrations, ``broken_step`` naming an op that does not exist."""
    root = directory / "migrations"
    shutil.copytree(SHIPPED, root)
    broken = broken_step(root)
    broken.write_text(broken.read_text().replace('op = "rename"', 'op = "renam"'))
    return root


def broken_step(root: Path) -> Path:
    """The step ``broken_migrations`` breaks (``kv_arena.ready`` v1 -> v2), which the errors name."""
    return root / "kv_arena.ready" / "v1-to-v2.toml"
