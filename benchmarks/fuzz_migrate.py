"""Coverage-guided fuzzing of the migration engine and the log validator with atheris (libFuzzer).

Each input is a log: the engine migrates it in all three output formats and the validator checks it.
Nothing may raise; the JSON-lines output must have one line per input line, each either the input
line unchanged or a valid event. The corpus is seeded with the golden corpus (tests/corpus), so the
fuzzer starts from real sglang lines and mutates outwards. Not part of CI: run it for a bounded time.

    .venv/bin/pip install atheris
    .venv/bin/python benchmarks/fuzz_migrate.py -max_total_time=300 [-jobs=2] [CORPUS_DIR]

With no corpus directory a temporary one is seeded from tests/corpus. A crash leaves the input that
caused it as ./crash-<sha1>; rerun with that file as the only argument to reproduce it.
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    import orjson

    from kvlog.file_validation import Counts, validate_lines
    from kvlog.migration import load_chain
    from kvlog.migration.engine import MigrateOptions, Migrator
    from kvlog.schema.event_validator import EventValidator

CHAIN = load_chain()
MIGRATORS = {fmt: Migrator(CHAIN, MigrateOptions(output_format=fmt)) for fmt in ("jsonl", "text", "legacy")}
VALIDATOR = EventValidator()
SEEDS = Path(__file__).resolve().parent.parent / "tests" / "corpus"


def one_input(data: bytes) -> None:
    for fmt, migrator in MIGRATORS.items():
        out = io.BytesIO()
        migrator.migrate("fuzz.log", io.BytesIO(data), out)
        if fmt != "jsonl":
            continue
        ins, outs = io.BytesIO(data).readlines(), io.BytesIO(out.getvalue()).readlines()  # LF only, as logs
        if len(ins) != len(outs):
            raise AssertionError(f"{len(ins)} lines in, {len(outs)} out")
        for before, after in zip(ins, outs, strict=True):
            if after != before and VALIDATOR.violations(orjson.loads(after)):
                raise AssertionError(f"{before!r} became an invalid event {after!r}")
    for _ in validate_lines("fuzz.jsonl", io.BytesIO(data).readlines(), Counts(), VALIDATOR):
        pass


def main() -> None:
    arguments = sys.argv
    if not any(not arg.startswith("-") for arg in arguments[1:]):
        seeds = Path(tempfile.mkdtemp(prefix="kvlog-fuzz-"))
        for log in sorted(SEEDS.glob("*.log")) + sorted(SEEDS.glob("*.jsonl")):
            for number, line in enumerate(log.read_bytes().splitlines(keepends=True)):
                (seeds / f"{log.stem}-{number}").write_bytes(line)
        arguments = [*arguments, str(seeds)]
        print(f"seed corpus: {seeds} ({len(list(seeds.iterdir()))} lines)", file=sys.stderr)
    atheris.Setup(arguments, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
