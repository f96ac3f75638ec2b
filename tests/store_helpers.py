"""A real S3-compatible server for the object-storage tests: moto's server mode on a free loopback port.

The server speaks the S3 protocol over HTTP; kvlog reaches it as it reaches any S3-compatible store
(MinIO, Ceph), through the standard ``AWS_*`` variables and ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

import gzip
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fleet_helpers import free_port

BUCKET = "kvlog-logs"
CORPUS = Path(__file__).resolve().parent / "corpus"


class S3:
    """The server's address, the variables that point a client at it, and a client of its own for checks."""

    def __init__(self, endpoint: str) -> None:
        import boto3  # noqa: PLC0415 - the fleet extra's (through s3fs)

        self.endpoint = endpoint
        self.environment = {
            "AWS_ACCESS_KEY_ID": "kvlog-test",
            "AWS_SECRET_ACCESS_KEY": "kvlog-test",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": endpoint,
        }
        self.client: Any = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="kvlog-test",
            aws_secret_access_key="kvlog-test",
            region_name="us-east-1",
        )

    def put(self, key: str, data: bytes, bucket: str = BUCKET) -> str:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)
        return f"s3://{bucket}/{key}"

    def get(self, key: str, bucket: str = BUCKET) -> bytes:
        return bytes(self.client.get_object(Bucket=bucket, Key=key)["Body"].read())

    def keys(self, prefix: str, bucket: str = BUCKET) -> list[str]:
        listed = self.client.list_objects_v2(Bucket=bucket, Prefix=prefix)
        return sorted(entry["Key"] for entry in listed.get("Contents", []))

    def uploads_in_progress(self, bucket: str = BUCKET) -> list[str]:
        """The multipart uploads begun and neither completed nor aborted."""
        return [upload["Key"] for upload in self.client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


@contextmanager
def s3_server() -> Iterator[S3]:
    """A moto S3 server with the bucket ``BUCKET``, and this process's ``AWS_*`` variables pointing at it."""
    with s3_server_alone() as store, pytest.MonkeyPatch.context() as patch:
        for name in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_SESSION_TOKEN"):
            patch.delenv(name, raising=False)
        for name, value in store.environment.items():
            patch.setenv(name, value)
        yield store
        forget_store_clients()


@contextmanager
def s3_server_alone() -> Iterator[S3]:
    """A moto S3 server with the bucket ``BUCKET``; this process's variables are left as they are."""
    pytest.importorskip("s3fs")
    from moto.server import ThreadedMotoServer  # noqa: PLC0415 - a test dependency (the dev extra)

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        store = S3(f"http://127.0.0.1:{port}")
        # moto keeps its buckets per process, not per server: each module starts from an empty store
        urllib.request.urlopen(urllib.request.Request(f"{store.endpoint}/moto-api/reset", method="POST")).close()
        store.client.create_bucket(Bucket=BUCKET)
        yield store
    finally:
        server.stop()


def forget_store_clients() -> None:
    """Drop the store clients fsspec keeps per process: the next one reads the variables as they are now."""
    from s3fs import S3FileSystem  # noqa: PLC0415 - the fleet extra's

    S3FileSystem.clear_instance_cache()


def server_logs(directory: Path) -> list[Path]:
    """The corpus's old server logs, one of them gzipped: the inputs a run migrates."""
    directory.mkdir(parents=True, exist_ok=True)
    made = []
    for index, source in enumerate(sorted(CORPUS.glob("*.log"))):
        if index == 1:
            path = directory / f"{source.stem}.log.gz"
            path.write_bytes(gzip.compress(source.read_bytes(), mtime=0))
        else:
            path = directory / source.name
            path.write_bytes(source.read_bytes())
        made.append(path)
    return made


def upload(store: S3, paths: list[Path], prefix: str) -> list[str]:
    """Each file as an object under ``prefix``, by its name; their URIs."""
    return [store.put(f"{prefix}{path.name}", path.read_bytes()) for path in paths]
