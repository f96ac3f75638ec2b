"""A compressed input is told by its first bytes in every command, and ``--in-place`` writes it back so."""

from __future__ import annotations

import dataclasses
import gzip
import io
from pathlib import Path

import pytest
import zstandard

from kvlog import commands

CORPUS = Path(__file__).parent / "corpus"
OLD = (CORPUS / "gen2_2025.log").read_bytes()


def migrated(path: Path, **options: object) -> bytes:
    out = io.BytesIO()
    outcome = commands.migrate(path, stdout=out, **options)  # type: ignore[arg-type]
    assert outcome.exit_status == commands.EXIT_OK, outcome.problems
    return out.getvalue()


def events_of(data: bytes) -> list[bytes]:
    return [line for line in data.splitlines() if line.startswith(b"{")]


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_a_compressed_file_without_its_suffix_is_read_by_every_command(tmp_path: Path, codec: str) -> None:
    pack = (lambda data: gzip.compress(data, mtime=0)) if codec == "gzip" else zstandard.ZstdCompressor().compress
    plain = tmp_path / "plain" / "server.log"
    plain.parent.mkdir()
    plain.write_bytes(OLD)
    packed = tmp_path / "packed" / "server.log.1"
    packed.parent.mkdir()
    packed.write_bytes(pack(OLD))
    expected = migrated(plain, only_events=True)
    assert migrated(packed, only_events=True) == expected.replace(str(plain).encode(), str(packed).encode())
    rows = [commands.summarize(name, stdout=io.BytesIO()).summary.rows for name in (packed, plain)]
    assert [dataclasses.replace(row, source="") for row in rows[0]] == [
        dataclasses.replace(row, source="") for row in rows[1]
    ]
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"".join(line + b"\n" for line in events_of(expected)))
    packed_events = tmp_path / "events"
    packed_events.write_bytes(pack(events.read_bytes()))
    for jobs in (1, 2):
        assert commands.validate(packed_events, jobs=jobs).counts == commands.validate(events, jobs=jobs).counts
    assert commands.migrate(packed, in_place=True).exit_status == 0
    replaced = packed.read_bytes()
    assert replaced[:2] == b"\x1f\x8b" if codec == "gzip" else replaced[:4] == b"\x28\xb5\x2f\xfd"
    unpacked = (
        gzip.decompress(replaced)
        if codec == "gzip"
        else zstandard.ZstdDecompressor().decompressobj().decompress(replaced)
    )
    assert unpacked == migrated(plain).replace(str(plain).encode(), str(packed).encode())
    assert (packed.parent / "server.log.1.orig").read_bytes() == pack(OLD)
