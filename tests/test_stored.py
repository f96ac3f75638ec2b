"""Results kept across runs (``kvlog.schema.stored``): a run that reads them back loads the same chain.

``kvlog migrate`` keeps the parsed migration files, every schema's fields (their ``$ref``s resolved) and
each text rule's starts, so that its next start-up skips that work and compiles a rule only when a line
first needs it. What it reads back must be exactly what it would compute, it must migrate every log as a
run that compiled all rules does, an edited file must be read anew (and a broken one refused at load),
and a cache that cannot be written or was damaged changes nothing.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvlog.migration import Chain, load_chain
from kvlog.migration.engine import MigrateOptions, Migrator
from kvlog.migration.errors import MigrationError
from kvlog.migration.ops import Op
from kvlog.schema.catalog import Catalog
from kvlog.schema.resources import data_dir
from kvlog.schema.stored import ENV

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = data_dir("schemas")
MIGRATIONS = data_dir("migrations")


def _loaded(migrations: Path = MIGRATIONS, schemas: Path = SCHEMAS) -> Chain:
    """The chain as a new ``kvlog migrate`` process loads it: a fresh catalog, nothing remembered in-process."""
    return load_chain(migrations, Catalog.load([schemas]))


def _what_is_read(chain: Chain) -> list[Any]:
    """Everything the chain reads lines and events by: each step, each rule's wording, typed capture and starts."""
    rules = [
        (g.id, r.template, r.version, r.role, r.level, r.whole, _ops(r.ops), r.parser.starts, r.parser.pattern.pattern)
        for g in [*chain.generations(), *chain.known.values()]
        for r in g.rules
    ]
    steps = [(s.id, s.source, s.target, s.invertible, s.examples, _ops(s.ops)) for s in chain.steps]
    return [rules, steps]


def _ops(ops: tuple[Op, ...]) -> list[tuple[str, ...]]:
    return [(op.kind, *op.reads, "->", *op.writes, "-", *op.drops) for op in ops]


def _fields(catalog: Catalog) -> dict[tuple[str, int], Any]:
    return {(e, v): dict(catalog.fields(e, v)) for e in catalog.events() for v in catalog.versions(e)}


def _computed(migrations: Path = MIGRATIONS, schemas: Path = SCHEMAS) -> Chain:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV, "")
        return _loaded(migrations, schemas)


def test_a_second_run_reads_back_exactly_what_the_first_computed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "kept"))
    first = _loaded()
    kept = sorted(path.name for path in (tmp_path / "kept").iterdir())
    assert kept == ["fields.json", "migrations.json", "rules.json"]
    second = _loaded()
    computed = _computed()
    assert _what_is_read(first) == _what_is_read(second) == _what_is_read(computed)
    assert _fields(second.catalog) == _fields(computed.catalog)


def test_a_run_that_finds_the_kept_results_needs_neither_the_toml_parser_nor_referencing(tmp_path: Path) -> None:
    script = (
        "import sys; from kvlog.migration import load_chain; load_chain(); "
        "print(sorted({'tomllib', 'referencing'} & set(sys.modules)))"
    )
    env = {**os.environ, ENV: str(tmp_path)}
    runs = [
        subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    ]
    assert runs == ["['referencing', 'tomllib']\n", "[]\n"]


def test_an_edited_migration_file_is_read_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "kept"))
    root = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS, root)
    assert _what_is_read(_loaded(root)) == _what_is_read(_computed())
    edited = root / "sglang-text" / "2025-01.toml"
    edited.write_text(edited.read_text().replace("KV Cache is allocated. K size:", "KV Cache is allocated. K-size:"))
    again = _loaded(root)
    assert _what_is_read(again) == _what_is_read(_computed(root))
    assert any("K-size:" in r.template.text for g in again.generations() for r in g.rules)


def test_an_edited_shared_definition_reaches_every_field_typed_through_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "kept"))
    schemas = tmp_path / "schemas"
    shutil.copytree(SCHEMAS, schemas)
    before = _loaded(schemas=schemas).catalog.fields("kv_pool.allocation", 2)["kv_bytes"].facts
    assert not before.signed
    common = schemas / "_common.json"
    common.write_text(common.read_text().replace('"type": "integer",\n      "minimum": 0,', '"type": "integer",', 1))
    after = _loaded(schemas=schemas).catalog
    assert after.fields("kv_pool.allocation", 2)["kv_bytes"].facts.signed
    assert _fields(after) == _fields(_computed(schemas=schemas).catalog)


def test_a_cache_directory_that_cannot_be_made_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(ENV, str(tmp_path / "a-file" / "kvlog"))
    chain = _loaded()
    assert _what_is_read(chain) == _what_is_read(_computed())
    assert _fields(chain.catalog) == _fields(_computed().catalog)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="cut-short"),
        pytest.param(
            lambda data: data.split(b"\n", 1)[0] + b'\n{"kv_pool.allocation@2": 5, "x": [1]}', id="other-shape"
        ),
        pytest.param(lambda data: bytes(range(256)), id="garbage"),
    ],
)
def test_a_damaged_entry_is_computed_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: Any) -> None:
    kept = tmp_path / "kept"
    monkeypatch.setenv(ENV, str(kept))
    _loaded()
    for name in ("fields.json", "migrations.json", "rules.json"):
        (kept / name).write_bytes(damage((kept / name).read_bytes()))
    chain = _loaded()
    assert _what_is_read(chain) == _what_is_read(_computed())
    assert _fields(chain.catalog) == _fields(_computed().catalog)
    assert _fields(_loaded().catalog) == _fields(chain.catalog)  # and what it kept instead reads back whole


def _compiled(chain: Chain) -> int:
    """How many of the chain's text rules are compiled so far (what the kept starts spare a run)."""
    generations = [*chain.generations(), *chain.known.values()]
    return sum(rule is not None for generation in generations for rule in generation._compiled)


def _migrated(chain: Chain, data: bytes) -> tuple[bytes, list[dict[str, Any]], Any]:
    out, dead = io.BytesIO(), []
    report = Migrator(chain, MigrateOptions()).migrate("x.log", io.BytesIO(data), out, dead.append)
    return out.getvalue(), dead, report


def test_a_later_run_compiles_only_the_rules_its_lines_need(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "kept"))
    first = _loaded()
    every = _compiled(first)
    assert every > 1000  # the first run compiled (and so checked) every rule
    later = _loaded()
    assert _compiled(later) == 0
    line = b"[2025-06-01 10:00:00 TP0] KV Cache is allocated. K size: 1.00 GB, V size: 1.00 GB.\n"
    out, _, _ = _migrated(later, line)
    assert b'"event":"kv_pool.allocation"' in out
    assert _migrated(later, line) == _migrated(first, line)
    assert 0 < _compiled(later) < every // 20


def test_a_run_compiling_its_rules_lazily_migrates_every_log_as_one_that_compiled_them_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "kept"))
    _loaded()
    lazy, compiled = _loaded(), _computed()
    logs = sorted({*ROOT.glob("tests/corpus/*.log"), *ROOT.glob("tests/wild/*/*.log"), *ROOT.glob("examples/*.log")})
    assert len(logs) > 50
    for log in logs:
        data = log.read_bytes()
        assert _migrated(lazy, data) == _migrated(compiled, data), log.name


def test_a_migration_file_broken_after_its_rules_were_kept_is_refused_at_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, str(tmp_path / "kept"))
    root = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS, root)
    _loaded(root)
    broken = root / "sglang-text" / "2025-01.toml"
    broken.write_text(broken.read_text().replace("K size: {k_bytes:gib2}", "K size: {k_bytes:gib9}", 1))
    for _ in range(2):  # and nothing kept for the broken files: the next run refuses them too
        with pytest.raises(MigrationError, match=r"2025-01\.toml: unknown unit 'gib9'"):
            _loaded(root)
