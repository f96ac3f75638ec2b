"""Store inputs expand as local ones do: ``-o PREFIX/`` mirrors their keys, and an object named twice is read once.

Against moto's S3 server on loopback (``store_helpers``), each compared with the same run on local files.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import BUCKET, S3, s3_server

from kvlog import commands

CORPUS = Path(__file__).parent / "corpus"
OLD = (CORPUS / "gen2_2025.log").read_bytes()


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    with s3_server() as started:
        yield started


def fleet(s3: S3, prefix: str) -> dict[str, bytes]:
    """Two nodes' logs of one name, and one at the top, under ``prefix``: their keys below it and contents."""
    logs = {"node1/server.log": OLD.replace(b"TP0", b"TP1"), "node2/server.log": OLD, "top.log": OLD}
    for key, data in logs.items():
        s3.put(f"{prefix}{key}", data)
    return logs


@pytest.mark.parametrize("named", ["{prefix}", "{prefix}*/server.log"])
def test_output_prefix_mirrors_the_keys_below_the_prefix_or_the_pattern(s3: S3, named: str, tmp_path: Path) -> None:
    prefix, out = f"mirror-{len(named)}/in/", f"mirror-{len(named)}/out/"
    logs = fleet(s3, prefix)
    done = commands.migrate(
        named.format(prefix=f"s3://{BUCKET}/{prefix}"), output=f"s3://{BUCKET}/{out}", output_format="text"
    )
    assert done.exit_status == 0, done.problems
    wanted = sorted(logs) if "*" not in named else ["node1/server.log", "node2/server.log"]
    assert sorted(key.removeprefix(out) for key in s3.keys(out)) == wanted
    for key in wanted:
        local = tmp_path / key.replace("/", "-")
        local.write_bytes(logs[key])
        text = io.BytesIO()
        commands.migrate(local, output_format="text", stdout=text)  # today's wording: no line names its input
        assert s3.get(f"{out}{key}") == text.getvalue()


def test_an_object_named_twice_is_read_once(s3: S3) -> None:
    prefix = "twice/"
    s3.put(f"{prefix}server.log", OLD)
    once, twice = io.BytesIO(), io.BytesIO()
    uri = f"s3://{BUCKET}/{prefix}server.log"
    commands.migrate(uri, only_events=True, stdout=once)
    notices: list[str] = []
    names = [f"s3://{BUCKET}/{prefix}", f"s3://{BUCKET}/{prefix}*.log", uri, f"s3a://{BUCKET}/{prefix}server.log"]
    done = commands.migrate(names, only_events=True, stdout=twice, on_notice=notices.append)
    assert done.exit_status == 0, done.problems
    assert twice.getvalue() == once.getvalue() != b""
    assert len(notices) == 1 and notices[0].startswith("3 name(s) of a file named already, each file read once")
    validated = commands.validate(names, on_finding=lambda _: None)
    assert validated.counts == commands.validate(uri, on_finding=lambda _: None).counts
