"""``kvlog follow --state``'s file: saved whole, read back exactly, and refused with a reason when it is not one."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from kvlog.follow.errors import StateError
from kvlog.follow.state import FileMark, FollowState, digest, load, lock_path, locked, save

HEAD = b"[2026-07-21 09:00:00 TP0] Load weight begin. avail mem=70.00 GB\n"


def mark(**changes: Any) -> FileMark:
    """A mark of a file whose first bytes are ``HEAD``, with ``changes``."""
    fields: dict[str, Any] = {
        "path": "/logs/server.log",
        "device": 2049,
        "inode": 131,
        "line": 12,
        "offset": 4096,
        "head_sha256": digest(HEAD),
        "head_bytes": len(HEAD),
    } | changes
    return FileMark(**fields)


def written(path: Path, document: Any) -> Path:
    path.write_bytes(orjson.dumps(document))
    return path


def state_with(files: list[Any], **fields: Any) -> dict[str, Any]:
    return {"format": "kvlog-follow-state", "version": 1, "files": files} | fields


def test_a_state_saved_is_read_back_exactly(tmp_path: Path) -> None:
    state = FollowState(
        (mark(), mark(path="/logs/server.log.1", inode=99, line=0, offset=0, draining=True)),
        "/out/events.jsonl",
        123,
        2049,
        77,
        files_opened=False,
    )
    save(tmp_path / "state.json", state)
    assert load(tmp_path / "state.json") == state


def test_the_saved_document_names_its_format_and_every_field(tmp_path: Path) -> None:
    save(tmp_path / "state.json", FollowState((mark(),)))
    data = (tmp_path / "state.json").read_bytes()
    assert data.endswith(b"}\n")
    assert orjson.loads(data) == state_with(
        [
            {
                "path": "/logs/server.log",
                "device": 2049,
                "inode": 131,
                "line": 12,
                "offset": 4096,
                "head_sha256": hashlib.sha256(HEAD).hexdigest(),
                "head_bytes": len(HEAD),
                "draining": False,
            }
        ],
        output=None,
        output_size=None,
        output_device=None,
        output_inode=None,
        files_opened=True,
    )


def test_each_save_replaces_the_file_in_one_rename_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save(path, FollowState((mark(),)))
    first = path.stat().st_ino
    save(path, FollowState((mark(line=13),)))
    assert path.stat().st_ino != first  # a new file took the name: a reader never sees half of one
    assert os.listdir(tmp_path) == ["state.json"]
    loaded = load(path)
    assert loaded is not None
    assert loaded.files[0].line == 13


def test_a_state_that_cannot_be_saved_is_a_state_error(tmp_path: Path) -> None:
    with pytest.raises(StateError, match=r"^cannot save the state: .*No such file or directory"):
        save(tmp_path / "missing" / "state.json", FollowState())


def test_no_state_yet_is_none(tmp_path: Path) -> None:
    assert load(tmp_path / "state.json") is None


def test_a_state_that_cannot_be_read_says_so(tmp_path: Path) -> None:
    (tmp_path / "state.json").mkdir()
    with pytest.raises(StateError) as raised:
        load(tmp_path / "state.json")
    assert str(raised.value) == f"{tmp_path / 'state.json'}: cannot read the state: Is a directory"


def test_a_state_without_a_field_it_may_omit_loads_with_its_default(tmp_path: Path) -> None:
    entry = {name: value for name, value in vars(mark()).items() if name != "draining"}
    loaded = load(written(tmp_path / "state.json", state_with([entry])))
    assert loaded == FollowState((mark(),))


def test_counts_of_zero_are_counts(tmp_path: Path) -> None:
    """A file followed from its very start: no line written yet, offset 0, an empty head."""
    empty = mark(line=0, offset=0, device=0, inode=0, head_bytes=0, head_sha256=digest(b""))
    loaded = load(written(tmp_path / "state.json", state_with([vars(empty)])))
    assert loaded == FollowState((empty,))


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        (b"{not json", "unexpected character"),
        ([], 'not a kvlog follow state (no "format": "kvlog-follow-state")'),
        ({"files": []}, 'not a kvlog follow state (no "format": "kvlog-follow-state")'),
        ({"format": "kvlog-follow-state", "files": []}, "state version missing; this kvlog reads version 1"),
        ({"format": "kvlog-follow-state", "version": 2, "files": []}, "state version 2; this kvlog reads version 1"),
        (
            {"format": "kvlog-follow-state", "version": True, "files": []},
            "state version true; this kvlog reads version 1",
        ),
        (state_with([], files_opened=1), "files_opened is 1, not true or false"),
        ({"format": "kvlog-follow-state", "version": 1}, "'files'"),
        (state_with(["server.log"]), "a file entry is str, not an object"),
        (state_with([{"path": "x.log"}]), "a file entry has no device, inode, line, offset, head_sha256, head_bytes"),
        (state_with([vars(mark(line=-1))]), "/logs/server.log: line is -1, not a count"),
        (state_with([vars(mark(offset=True))]), "/logs/server.log: offset is true, not a count"),
        (state_with([vars(mark(device=1.5))]), "/logs/server.log: device is 1.5, not a count"),
        (state_with([vars(mark(inode="131"))]), '/logs/server.log: inode is "131", not a count'),
        (state_with([vars(mark(head_bytes=-64))]), "/logs/server.log: head_bytes is -64, not a count"),
        (state_with([vars(mark(path=7))]), "a file entry's path and head_sha256 are strings"),
        (state_with([vars(mark(head_sha256=None))]), "a file entry's path and head_sha256 are strings"),
        (state_with([vars(mark(draining=1))]), "/logs/server.log: draining is 1, not true or false"),
        (state_with([], output=3), "output is 3, not a string"),
        (state_with([], output_size="12"), 'output_size is "12", not an integer'),
        (state_with([], output_size=True), "output_size is true, not an integer"),
        (state_with([], output_device=1.0), "output_device is 1.0, not an integer"),
        (state_with([], output_inode=[]), "output_inode is [], not an integer"),
    ],
)
def test_a_file_that_is_no_usable_state_is_refused_with_its_reason(tmp_path: Path, document: Any, reason: str) -> None:
    path = tmp_path / "state.json"
    if isinstance(document, bytes):
        path.write_bytes(document)
    else:
        written(path, document)
    with pytest.raises(StateError) as raised:
        load(path)
    said = str(raised.value)
    assert said.startswith(f"{path}: cannot use the state: ")
    assert reason in said
    assert said.endswith("; remove it to follow from the start")


def test_a_mark_knows_its_file_by_the_first_bytes() -> None:
    known = mark()
    assert known.same_file(HEAD)
    assert known.same_file(HEAD + b"more lines since\n")  # a head longer than the mark's: its first bytes count
    assert not known.same_file(HEAD.replace(b"70.00", b"71.00"))  # rewritten from its start
    assert not known.same_file(HEAD[:-1])  # shorter than the head the mark saw: truncated meanwhile


def test_a_mark_of_a_head_now_shorter_is_not_that_file_even_where_the_bytes_agree() -> None:
    shorter = mark(head_sha256=digest(HEAD[:10]), head_bytes=len(HEAD))
    assert not shorter.same_file(HEAD[:10])


def test_the_lock_is_a_hidden_file_beside_the_state() -> None:
    assert lock_path(Path("/var/lib/kvlog/state.json")) == Path("/var/lib/kvlog/.state.json.lock")


def test_one_follower_at_a_time_holds_a_state(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    with locked(path):
        assert lock_path(path).exists()
        with pytest.raises(StateError) as raised, locked(path):
            pass
        assert str(raised.value) == f"{path}: another kvlog follow uses this state (it holds {lock_path(path)})"
    with locked(path):  # released with the first holder: the next one takes it
        pass


def test_a_state_whose_lock_cannot_be_made_says_why(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "state.json"
    with pytest.raises(StateError) as raised, locked(path):
        pass
    assert str(raised.value) == (f"{path}: cannot lock the state ({lock_path(path)}): No such file or directory")
