"""Where the catalog to check lives: a directory, a project's ``[tool.kvlog]`` table, or kvlog's own."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvlog.check.errors import ConfigError, Refused
from kvlog.check.evolution import MODES, Mode
from kvlog.check.files import inside, read_file
from kvlog.schema.resources import data_dir


@dataclass(frozen=True)
class Project:
    """The directories one ``kvlog check`` run reads; ``migrations``/``corpus`` are None when there are none.

    ``root`` is the project they belong to: no file outside it is read, even through a link.
    """

    schemas: Path
    migrations: Path | None
    corpus: Path | None
    root: Path
    mode: Mode | None = None


def resolve_project(path: Path | None) -> Project:
    """``path`` (or the working directory, falling back to kvlog's shipped catalog) as a ``Project``.

    A project says where its catalog is in ``pyproject.toml``::

        [tool.kvlog]
        schemas = "telemetry/schemas"
        migrations = "telemetry/migrations"
        corpus = "tests/corpus"          # optional: golden logs replayed by the corpus rule
        compatibility = "full"           # optional: the default --mode
    """
    if path is not None:
        if not path.is_dir():
            raise ConfigError(f"{path}: not a directory")
        table = _tool_table(path / "pyproject.toml")
        if table is not None:
            return _from_table(path, table)
        if (path / "schemas").is_dir():
            for part in ("schemas", "migrations", "tests/corpus"):
                if (path / part).is_dir() and not inside(path / part, path):
                    raise ConfigError(f"{path / part}: a link out of {path}; name the directory it links to instead")
            return Project(
                path / "schemas", _optional_dir(path / "migrations"), _optional_dir(path / "tests" / "corpus"), path
            )
        raise ConfigError(f"{path}: holds neither schemas/ nor a pyproject.toml with a [tool.kvlog] table")
    table = _tool_table(Path("pyproject.toml"))
    if table is not None:
        return _from_table(Path(), table)
    return Project(data_dir("schemas"), _optional_dir(data_dir("migrations")), None, data_dir("schemas").parent)


def _tool_table(pyproject: Path) -> dict[str, Any] | None:
    if not pyproject.exists() and not pyproject.is_symlink():
        return None
    try:
        document = tomllib.loads(read_file(pyproject, pyproject.parent).decode())
    except Refused as exc:
        raise ConfigError(f"{pyproject}: {exc}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
        raise ConfigError(f"{pyproject}: cannot read: {exc}") from None
    table = document.get("tool", {}).get("kvlog")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{pyproject}: [tool.kvlog] must be a table")
    return table


def _from_table(root: Path, table: dict[str, Any]) -> Project:
    where = root / "pyproject.toml"
    for key in ("schemas", "migrations", "corpus", "compatibility"):
        if key in table and not isinstance(table[key], str):
            raise ConfigError(f"{where}: [tool.kvlog] {key} must be a string")
    if "schemas" not in table:
        raise ConfigError(f'{where}: [tool.kvlog] needs schemas = "<directory>" for kvlog check')
    schemas = _table_dir(root, table, "schemas")
    migrations = _table_dir(root, table, "migrations") if "migrations" in table else None
    corpus = _table_dir(root, table, "corpus") if "corpus" in table else None
    mode = table.get("compatibility")
    if mode is not None and mode not in MODES:
        raise ConfigError(f"{where}: [tool.kvlog] compatibility = {mode!r}: expected one of {', '.join(MODES)}")
    return Project(schemas, migrations, corpus, root, mode)


def _table_dir(root: Path, table: dict[str, Any], key: str) -> Path:
    """``[tool.kvlog] key``: a directory inside the project, since a pull request can edit pyproject.toml.

    A directory elsewhere (``../x``, ``/etc``, a link out) is refused: its files would be read and
    quoted in findings. One given on the command line is the user's choice and is read.
    """
    where = root / "pyproject.toml"
    directory: Path = root / table[key]
    if "\0" in table[key]:
        raise ConfigError(f"{where}: [tool.kvlog] {key} = {table[key]!r} is not a directory")
    if not inside(directory, root):
        raise ConfigError(
            f"{where}: [tool.kvlog] {key} = {table[key]!r} is outside the project; "
            "name a directory outside it on the command line instead"
        )
    if not directory.is_dir():
        raise ConfigError(f"{where}: [tool.kvlog] {key} = {table[key]!r} is not a directory")
    return directory


def _optional_dir(path: Path) -> Path | None:
    return path if path.is_dir() else None
