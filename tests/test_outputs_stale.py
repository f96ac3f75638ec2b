"""What a killed run left beside its outputs is swept; not a live run's, not a link, not another file's."""

from __future__ import annotations

import fcntl
from pathlib import Path

from kvlog.io.outputs import remove_stale_temporaries

TOKEN = "0123456789abcdef"


def _temporary(directory: Path, target: str, token: str = TOKEN) -> Path:
    path = directory / f".{target}.{token}.kvlog-tmp"
    path.write_bytes(b"half a file\n")
    return path


def test_the_temporaries_of_every_target_are_swept_in_one_call(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    stale = [
        _temporary(first, "app.log.jsonl"),
        _temporary(first, "app.log.jsonl", "fedcba9876543210"),
        _temporary(first, "rank1.jsonl.gz"),  # a target whose name holds dots and a suffix
        _temporary(second, "app.log.jsonl"),
    ]
    kept = [
        _temporary(first, "other.jsonl"),  # no target of this run
        _temporary(first, "app.log", TOKEN),  # a prefix of a target's name, not a target
        _temporary(first, "app.log.jsonl", "not-a-token-0000"),
        first / "app.log.jsonl",  # the outputs themselves
        first / f"app.log.jsonl.{TOKEN}.kvlog-tmp",  # not hidden: not a name kvlog makes
    ]
    for path in kept[3:]:
        path.write_bytes(b"kept\n")
    targets = (first / "app.log.jsonl", first / "rank1.jsonl.gz", second / "app.log.jsonl", tmp_path / "gone" / "x")
    assert remove_stale_temporaries(*targets) == len(stale)
    assert [path for path in stale if path.exists()] == []
    assert all(path.exists() for path in kept)


def test_a_live_runs_temporary_and_a_planted_link_are_left_alone(tmp_path: Path) -> None:
    live = _temporary(tmp_path, "app.jsonl")
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    link = tmp_path / ".app.jsonl.fedcba9876543210.kvlog-tmp"
    link.symlink_to(victim)
    with live.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as atomic_output holds it while it writes
        assert remove_stale_temporaries(tmp_path / "app.jsonl") == 0
    assert live.exists() and link.is_symlink() and victim.read_bytes() == b"precious\n"
    assert remove_stale_temporaries(tmp_path / "app.jsonl") == 1  # the writer gone, its temporary is stale
    assert not live.exists() and link.is_symlink()
