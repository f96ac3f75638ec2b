"""Copies of kvlog's migration files with one step edited or broken, for the tests of what loading does."""

from __future__ import annotations

import shutil
from pathlib import Path

SHIPPED = Path(__file__).resolve().parent.parent / "migrations"


def edited_migrations(directory: Path, relative: str, old: str, new: str) -> Path:
    """``directory/migrations``, kvlog's migrations with ``old`` replaced by ``new`` (once) in ``relative``.

    Returns the edited file, which load errors must name. ``old`` must be in it: an edit that changed
    nothing would make a test of a broken file pass on an intact one.
    """
    root = directory / "migrations"
    shutil.copytree(SHIPPED, root)
    path = root / relative
    text = path.read_text()
    assert old in text, f"{relative} has no {old!r}"
    path.write_text(text.replace(old, new, 1))
    return path


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
