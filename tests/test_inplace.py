"""``kvlog.io.inplace`` on its own: a file that changed between reading and renaming stays as it was.

The subprocess tests (``test_migration_cli_safety.py``) cannot choose the moment a change happens; here each
kind of change is made exactly between the migration and the rename.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvlog.io.errors import ReplaceRefused
from kvlog.io.inplace import InPlace

OLD = (Path(__file__).parent / "corpus" / "gen2_2025.log").read_bytes()


@pytest.mark.parametrize("change", ["append", "rewrite-same-size", "renamed-away", "replaced-by-link", "touched"])
def test_a_file_that_changed_between_reading_and_renaming_is_left_untouched(tmp_path: Path, change: str) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(OLD)
    secret = tmp_path / "secret"
    secret.write_bytes(b"root-only secret\n")
    replacement = InPlace(str(log), ".orig")
    try:
        with replacement.output() as out:
            out.write(b"migrated\n")
        if change == "append":
            with log.open("ab") as handle:
                handle.write(b"one more line\n")
        elif change == "rewrite-same-size":
            log.write_bytes(OLD.upper())
        elif change == "renamed-away":
            log.rename(tmp_path / "rotated.log")
            log.write_bytes(b"a new log\n")
        elif change == "replaced-by-link":
            log.unlink()
            log.symlink_to(secret)
        else:
            os.utime(log, ns=(0, 0))
        with pytest.raises(ReplaceRefused, match="changed while migrating"):
            replacement.replace(changed=True)
    finally:
        replacement.discard()
        replacement.close()
    assert b"migrated\n" not in [p.read_bytes() for p in tmp_path.iterdir() if p.is_file()]
    assert not (tmp_path / "app.log.orig").exists() and not list(tmp_path.glob(".*kvlog-tmp"))
    assert secret.read_bytes() == b"root-only secret\n"
