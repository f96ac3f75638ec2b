"""Results kept across runs (``kvlog.schema.stored``): a run that reads them back loads the same chain.

``kvlog migrate`` keeps the parsed migration files and every schema's fields (their ``$ref``s resolved)
so that its next start-up skips that work. What it reads back must be exactly what it would compute,
an edited file must be read anew, and a cache that cannot be written or was damaged changes nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kvlog.migration import Chain, load_chain
from kvlog.migration.ops import Op
from kvlog.schema.catalog import Catalog
from kvlog.schema.resources import data_dir
from kvlog.schema.stored import ENV

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
    assert sorted(path.name for path in (tmp_path / "kept").iterdir()) == ["fields.json", "migrations.json"]
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
    for name in ("fields.json", "migrations.json"):
        (kept / name).write_bytes(damage((kept / name).read_bytes()))
    chain = _loaded()
    assert _what_is_read(chain) == _what_is_read(_computed())
    assert _fields(chain.catalog) == _fields(_computed().catalog)
    assert _fields(_loaded().catalog) == _fields(chain.catalog)  # and what it kept instead reads back whole
