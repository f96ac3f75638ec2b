"""The default path writes what the reference path (``validate_all``) writes, byte for byte, on every corpus.

The default path reuses the event of a message seen before and validates an event built from a wording
only once per rule and keys (``kvlog.migration.engine.FileRun._record``); the reference builds every
event through its steps and validates each. Both are run on the golden logs, every harvested format's
samples (as one log: each line after the others, so the context and the reuse meet them), the wild
corpus, and fuzzed blocks of all of them (figures changed, lines cut, glued, repeated on other ranks), in
every output format: the bytes written, the report and the dead letters must be the same.
"""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from migration_helpers import shipped_chain

from kvlog import commands
from kvlog.migration.engine import MigrateOptions, Migrator, OutputFormat

ROOT = Path(__file__).resolve().parent
GOLDEN = sorted((ROOT / "corpus").glob("*.log"))
WILD = sorted((ROOT / "wild").rglob("*.log"))
FIGURE = re.compile(r"\d+(?:\.\d+)?")
TP = re.compile(r"\bTP(\d+)")


def format_samples() -> bytes:
    """Every harvested format's sample lines (``tests/test_formats.py``'s), one log."""
    from test_formats import DECIDED, RELEASES, TOOL  # noqa: PLC0415  (its harvest, loaded once)

    lines = [
        sample.line
        for fmt, rule in DECIDED
        if rule is not None
        for sample in TOOL.samples(fmt, rule, RELEASES[fmt.server])
    ]
    return "".join(f"{line}\n" for line in lines).encode()


def fuzzed(data: bytes, seed: int) -> bytes:
    """``data``'s lines mutated as transit and fleets do: figures redrawn, cut, glued, repeated on other ranks."""
    rng = random.Random(seed)
    out: list[str] = []
    for read in data.decode("utf-8", "replace").splitlines():
        roll, line = rng.random(), read
        if roll < 0.3:
            line = FIGURE.sub(lambda m: f"{rng.randint(0, 10 ** len(m.group()))}.{'5' * rng.randint(1, 2)}", read)
        elif roll < 0.4:
            line = read[: rng.randint(0, len(read))]
        elif roll < 0.45 and out:
            out[-1] += line  # glued to the line before
            continue
        elif roll < 0.6:
            out.append(TP.sub(lambda m: f"TP{int(m.group(1)) + rng.randint(0, 64)}", line))
        out.append(line)
    return "".join(f"{line}\n" for line in out).encode()


def migrated(options: MigrateOptions, data: bytes) -> tuple[bytes, dict[str, Any], list[dict[str, Any]]]:
    out, dead = io.BytesIO(), []  # type: ignore[var-annotated]
    report = Migrator(shipped_chain(), options).migrate("ref.log", io.BytesIO(data), out, dead.append)
    return out.getvalue(), report.to_json(), dead


CORPORA = {
    "golden": b"".join(path.read_bytes() for path in GOLDEN),
    "wild": b"".join(path.read_bytes() for path in WILD),
}


def corpus(name: str) -> bytes:
    if name == "formats":
        return format_samples()
    base, _, seed = name.partition("-fuzzed-")
    data = corpus(base) if base == "formats" else CORPORA[base]
    return fuzzed(data, int(seed)) if seed else data


NAMES = [*CORPORA, "formats", *(f"{base}-fuzzed-{seed}" for base in (*CORPORA, "formats") for seed in (1, 2))]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("output_format", "to_catalog", "usage"),
    [("jsonl", None, "all"), ("jsonl", 1, "none"), ("text", None, "none"), ("legacy", None, "none")],
)
def test_the_default_path_writes_what_the_reference_writes(
    name: str, output_format: OutputFormat, to_catalog: int | None, usage: Any
) -> None:
    data = corpus(name)
    options = MigrateOptions(output_format=output_format, to_catalog=to_catalog, usage=usage)
    reference = migrated(
        MigrateOptions(output_format=output_format, to_catalog=to_catalog, usage=usage, validate_all=True), data
    )
    assert migrated(options, data) == reference
    assert reference[1]["events"] > 0


def test_validate_all_is_the_reference_migrate_takes_and_writes_the_same(tmp_path: Path) -> None:
    """``migrate(validate_all=True)`` (``--validate-all``) validates every event: the same files, the same letters.

    The wake line names no arenas: both paths read it with ``arena_ids`` filled as ``[]`` (rule
    ``arenas-not-on-line``), the default one without validating what the rule builds again.
    """
    log = tmp_path / "server.log"
    pool = "[2026-07-24 08:00:32 TP0] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB"
    wake = "[2026-07-24 08:00:40 TP0] KV Cache awake: restored=0 KiB in 0 min; contents zeroed"
    log.write_text(f"{pool}\n{wake}\n{pool}\n{wake}\n")
    written = {}
    for validate_all in (False, True):
        out, dead = tmp_path / f"out-{validate_all}.log", tmp_path / f"dead-{validate_all}.jsonl"
        commands.migrate(str(log), output=str(out), dead_letter=str(dead), validate_all=validate_all)
        written[validate_all] = (out.read_bytes(), dead.read_bytes())
    assert written[False] == written[True]
    output, letters = written[True]
    events = [json.loads(line) for line in output.splitlines()]
    assert [event["event"] for event in events] == ["kv_pool.allocation", "kv_pool.wake"] * 2
    assert all(event["arena_ids"] == [] for event in events if event["event"] == "kv_pool.wake")
    assert letters == b""
