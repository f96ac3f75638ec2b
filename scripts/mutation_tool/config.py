"""``scripts/mutation.toml``: the modules in scope, each with its test selection, and the equivalent mutants."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path


class ConfigError(Exception):
    """The configuration file is missing or malformed (a usage error)."""


@dataclass(frozen=True)
class Equivalent:
    """A surviving mutant judged equivalent: no test can tell it from the original, for ``reason``."""

    key: str
    reason: str


@dataclass(frozen=True)
class Config:
    """What ``scripts/mutation.toml`` says."""

    selections: dict[str, tuple[str, ...]]  # module -> globs of test files, relative to the root
    equivalents: tuple[Equivalent, ...] = ()
    timeout_min: float = 10.0  # seconds: the least a mutant's run is given
    baseline_timeout: float = 3600.0  # seconds: a baseline that runs longer stops the tool
    _by_key: dict[str, Equivalent] = field(default_factory=dict, compare=False)

    def equivalent(self, key: str) -> Equivalent | None:
        """The entry that lists ``key`` as equivalent, if any."""
        if not self._by_key:
            self._by_key.update({entry.key: entry for entry in self.equivalents})
        return self._by_key.get(key)

    def test_files(self, root: Path, module: str) -> tuple[str, ...]:
        """The test files of ``module``'s selection that exist, relative to the root, sorted."""
        found: set[str] = set()
        for pattern in self.selections[module]:
            found.update(path.relative_to(root).as_posix() for path in root.glob(pattern) if path.is_file())
        return tuple(sorted(found))


def load(path: Path) -> Config:
    """Read the configuration at ``path``."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {error}") from error
    modules = data.get("modules")
    if not isinstance(modules, dict) or not modules:
        raise ConfigError(f'{path}: no [modules."<path>"] table names a module in scope')
    selections: dict[str, tuple[str, ...]] = {}
    for module, entry in modules.items():
        tests = entry.get("tests") if isinstance(entry, dict) else None
        if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
            raise ConfigError(f'{path}: [modules.{module!r}] needs tests = ["<glob of test files>", ...]')
        selections[module] = tuple(tests)
    equivalents: list[Equivalent] = []
    for entry in data.get("equivalent", []):
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str) or not entry.get("reason"):
            raise ConfigError(f"{path}: each [[equivalent]] needs a key and a reason: {entry!r}")
        equivalents.append(Equivalent(entry["key"], str(entry["reason"])))
    settings = data.get("settings", {})
    return Config(
        selections=selections,
        equivalents=tuple(equivalents),
        timeout_min=float(settings.get("timeout_min", 10.0)),
        baseline_timeout=float(settings.get("baseline_timeout", 3600.0)),
    )
