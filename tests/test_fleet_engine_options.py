"""``--engine``: options that belong to the other engine are refused before anything is read or written."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
from pathlib import Path

import pytest
from fleet_helpers import ENVIRONMENT, free_port

from kvlog import commands
from kvlog.errors import OptionError

CORPUS = Path(__file__).resolve().parent / "corpus"


@pytest.mark.parametrize(
    ("engine", "jobs", "ray_address", "says"),
    [
        pytest.param(
            "local",
            1,
            "127.0.0.1:6379",
            "ray_address names a Ray cluster: it needs engine ray",
            id="address-without-ray",
        ),
        pytest.param("ray", 2, None, "jobs sets this machine's worker processes", id="jobs-with-ray"),
        pytest.param("dask", 1, None, "engine 'dask': expected one of local, ray", id="unknown-engine"),
    ],
)
def test_migrate_refuses_the_other_engines_options(
    tmp_path: Path, engine: str, jobs: int, ray_address: str | None, says: str
) -> None:
    output = tmp_path / "out.jsonl"
    with pytest.raises(OptionError) as refused:
        commands.migrate(CORPUS / "gen2_2025.log", output=output, engine=engine, jobs=jobs, ray_address=ray_address)
    assert str(refused.value).startswith(says)
    assert not output.exists()


@pytest.mark.parametrize(
    ("engine", "jobs", "ray_address"),
    [
        pytest.param("local", None, "127.0.0.1:6379", id="address-without-ray"),
        pytest.param("ray", 4, None, id="jobs-with-ray"),
    ],
)
def test_validate_refuses_the_other_engines_options(engine: str, jobs: int | None, ray_address: str | None) -> None:
    found: list[object] = []
    with pytest.raises(OptionError):
        commands.validate(
            CORPUS / "kvlog_json_v1.log", engine=engine, jobs=jobs, ray_address=ray_address, on_finding=found.append
        )
    assert found == []


def test_an_address_nothing_listens_at_is_refused_naming_it(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from kvlog.fleet import ClusterError  # noqa: PLC0415 - the fleet extra

    with pytest.raises(
        ClusterError, match=r"cannot connect to the Ray cluster at 127\.0\.0\.1:1 \(from ray_address\): "
    ):
        commands.migrate(CORPUS / "gen2_2025.log", output=tmp_path / "o.jsonl", engine="ray", ray_address="127.0.0.1:1")
    with pytest.raises(ClusterError, match="expected HOST:PORT or ray://HOST:PORT"):
        commands.validate(CORPUS / "kvlog_json_v1.log", engine="ray", ray_address="no-port")


@pytest.mark.parametrize("source", ["RAY_ADDRESS", "address file"])
def test_a_stale_address_found_without_the_option_is_refused_at_once_naming_where_it_came_from(
    tmp_path: Path, source: str
) -> None:
    """A head that died without ``ray stop`` leaves its address behind: ``ray.init`` retried it for minutes."""
    pytest.importorskip("ray")
    address = f"127.0.0.1:{free_port()}"  # nothing listens there any more
    environment = {name: value for name, value in ENVIRONMENT.items() if name not in {"RAY_ADDRESS", "RAY_TMPDIR"}}
    environment["TMPDIR"] = str(tmp_path)  # where ray's "auto" reads the address the last `ray start` wrote
    recorded = tmp_path / "ray" / "ray_current_cluster"
    if source == "RAY_ADDRESS":
        environment["RAY_ADDRESS"] = address
        origin = "RAY_ADDRESS"
    else:
        recorded.parent.mkdir()
        recorded.write_text(f"{address}\n")
        origin = f"{recorded}, written by the last `ray start` here"
    done = subprocess.run(
        [sys.executable, "-m", "kvlog", "migrate", str(CORPUS / "gen2_2025.log"), "--engine", "ray"],
        capture_output=True,
        env=environment,
        timeout=120,  # generous: the refusal comes within seconds; before, ray.init retried for 5 minutes
        check=False,
    )
    said = f"kvlog migrate: cannot connect to the Ray cluster at {address} (from {origin}): Connection refused\n"
    assert (done.returncode, done.stdout, done.stderr.decode()) == (2, b"", said)


def test_worker_processes_name_a_file_cut_short_and_keep_its_lines_as_one_process_does(tmp_path: Path) -> None:
    """A .gz cut short fails part-way: ``--jobs 2`` used to end the run on its missing staged output."""
    text = (CORPUS / "gen2_2025.log").read_bytes() * 20
    whole, cut = tmp_path / "whole.log.gz", tmp_path / "cut.log.gz"
    whole.write_bytes(gzip.compress(text))
    cut.write_bytes(gzip.compress(text)[: len(gzip.compress(text)) // 2])
    runs = []
    for jobs in (1, 2):
        stdout = io.BytesIO()
        outcome = commands.migrate([whole, cut, whole], jobs=jobs, stdout=stdout)
        runs.append((outcome.exit_status, outcome.problems, outcome.report.to_json(), stdout.getvalue()))
    assert runs[1] == runs[0]
    status, problems, _, written = runs[0]
    assert status == 2
    assert [problem.split(":")[0] for problem in problems] == [str(cut)]
    assert len(written) > 2 * len(text)  # both whole files, and the lines of the cut one before its end
