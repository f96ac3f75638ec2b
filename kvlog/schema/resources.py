"""Where the catalog's data files live.

The wheel carries `schemas/` and `migrations/` inside the package (`kvlog/_data/`); a source checkout
or an editable install keeps them at the repository root, where maintainers edit them. Looking in
both places means one tree of files is the source of truth in every install mode.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def data_dir(name: str) -> Path:
    """Return the directory holding the shipped `name` tree (`schemas` or `migrations`)."""
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"kvlog data directory {name!r} is missing from this installation")
