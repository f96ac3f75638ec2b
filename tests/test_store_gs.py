"""``gs://`` inputs and outputs through the same mechanism as ``s3://``, against a GCS-compatible server.

gcp-storage-emulator runs on loopback for the module; gcsfs reaches it through the standard
``STORAGE_EMULATOR_HOST`` variable. The results are compared with the same run on local files.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("gcsfs")
pytest.importorskip("gcp_storage_emulator")

from fleet_helpers import free_port
from store_helpers import server_logs

from kvlog import commands

BUCKET = "kvlog-gs-logs"


@pytest.fixture(scope="module")
def gs() -> Iterator[str]:
    """The bucket's URI on a GCS emulator that this process's gcsfs clients reach."""
    from gcp_storage_emulator.server import create_server  # noqa: PLC0415 - a test dependency (the dev extra)
    from gcsfs import GCSFileSystem  # noqa: PLC0415 - the fleet extra's

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=BUCKET)
    server.start()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
            GCSFileSystem.clear_instance_cache()
            yield f"gs://{BUCKET}/"
            GCSFileSystem.clear_instance_cache()
    finally:
        server.stop()


def test_migrate_and_validate_of_gs_objects_give_what_local_files_give(gs: str, tmp_path: Path) -> None:
    from gcsfs import GCSFileSystem  # noqa: PLC0415

    logs = server_logs(tmp_path / "logs")
    store = GCSFileSystem()
    for path in logs:
        store.pipe(f"{BUCKET}/in/{path.name}", path.read_bytes())
    local = commands.migrate(logs, output=tmp_path / "out/", output_format="text", report=tmp_path / "report.json")
    stored = commands.migrate(f"{gs}in/*.log*", output=f"{gs}out/", output_format="text", report=f"{gs}report.json")
    assert (stored.exit_status, stored.problems) == (local.exit_status, local.problems) == (0, ())
    outputs = {path.name: path.read_bytes() for path in (tmp_path / "out").iterdir()}
    assert {Path(key).name: store.cat(key) for key in store.find(f"{BUCKET}/out/")} == outputs
    report = (tmp_path / "report.json").read_bytes().replace(f"{logs[0].parent}/".encode(), f"{gs}in/".encode())
    assert store.cat(f"{BUCKET}/report.json") == report
    checked = commands.validate([f"{gs}out/{logs[0].name}", f"{gs}out/no-such-object.log"])
    assert checked.counts == commands.validate([tmp_path / "out" / logs[0].name]).counts
    assert [(failure.name, failure.reason) for failure in checked.input_failures] == [
        (f"{gs}out/no-such-object.log", "cannot open: no such object")
    ]


def test_a_gs_key_with_glob_characters_is_that_object_before_it_is_a_pattern(gs: str) -> None:
    from gcsfs import GCSFileSystem  # noqa: PLC0415

    store = GCSFileSystem()
    corpus = Path(__file__).resolve().parent / "corpus"
    store.pipe(f"{BUCKET}/lookalike/run[1].log", (corpus / "gen1_early_2025.log").read_bytes())
    store.pipe(f"{BUCKET}/lookalike/run1.log", (corpus / "gen2_2025.log").read_bytes())
    for name, read in (("run[1].log", "run[1].log"), ("run[1x].log", "run1.log"), ("r?n[[]1].log", "run[1].log")):
        stdout = io.BytesIO()
        outcome = commands.migrate(f"{gs}lookalike/{name}", stdout=stdout)
        assert (outcome.exit_status, outcome.report.files) == (0, 1)
        assert f'"file":"{gs}lookalike/{read}"'.encode() in stdout.getvalue(), name  # each event names its object
