"""Inputs and outputs in object storage (``s3://``, ``gs://``) through fsspec, and ``file://`` URIs.

Only a name that is a URI comes here: a plain path never does, so local runs keep their own code
path (``os.open``, a temporary beside the target and a rename). ``file://`` names a local path and
is turned into it (``local_name``): it keeps every guarantee of a path, ``--in-place`` included.

An object store has no rename, so an object is written only once it is complete: it is opened with
fsspec's ``autocommit=False`` (s3fs: a multipart upload, completed by ``commit`` at the end and
aborted on any error or stop; gcsfs: a resumable upload, finalized or cancelled the same way). A
failed or stopped run leaves no final object, partial or not. Reads are streamed in blocks
(``READ_BLOCK_BYTES``), writes buffered up to one part (``WRITE_BLOCK_BYTES``): memory is bounded
whatever the object's size. Credentials and the endpoint come from the store library's standard
sources (``AWS_*`` variables, ``~/.aws``, ``AWS_ENDPOINT_URL``; ``GOOGLE_APPLICATION_CREDENTIALS``).

fsspec and its stores are the ``fleet`` extra's: imported here only, and only once a URI is met.
"""

from __future__ import annotations

import importlib
import io
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import IO, Any
from urllib.parse import unquote, urlsplit

from kvlog.errors import OptionError
from kvlog.io.errors import InputError, OutputError
from kvlog.io.globs import is_pattern
from kvlog.io.uris import is_uri

#: the URI schemes kvlog reads and writes, and the fsspec package each needs
SCHEMES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs"}
#: the size of a ranged read from a store (one request per block)
READ_BLOCK_BYTES = 8 << 20
#: the part of a multipart upload held in memory before it is sent (S3 needs 5 MiB or more a part)
WRITE_BLOCK_BYTES = 8 << 20


def local_name(name: str) -> str:
    """``name``, or the local path a ``file://`` URI names (``file:///var/log/a.log``: ``/var/log/a.log``)."""
    if not name.startswith("file://"):
        return name
    parts = urlsplit(name)
    if parts.netloc not in ("", "localhost"):
        raise OptionError("{uri}: a file:// URI names a file on this machine (file:///path)", uri=name)
    return unquote(parts.path)


def _filesystem(uri: str) -> tuple[Any, str]:
    """The fsspec file system of ``uri``'s scheme and the path in it; OptionError when kvlog cannot use it."""
    scheme = uri.partition("://")[0].lower()
    if scheme not in SCHEMES:
        known = ", ".join(f"{name}://" for name in SCHEMES)
        raise OptionError("{uri}: unsupported scheme; kvlog reads and writes {known} and file://", uri=uri, known=known)
    try:
        fsspec = importlib.import_module("fsspec")
        importlib.import_module(SCHEMES[scheme])
    except ImportError:
        raise OptionError("{uri}: object storage needs the fleet extra: pip install 'kvlog[fleet]'", uri=uri) from None
    try:
        filesystem, path = fsspec.core.url_to_fs(uri)
    except Exception as exc:  # noqa: BLE001 - a store's configuration error (a bad endpoint URL) has many types
        raise OptionError("{uri}: cannot use the store: {error}", uri=uri, error=reason(exc)) from None
    return filesystem, path


def targets(*names: str | os.PathLike[str] | None) -> list[str | None]:
    """Where a run writes, as ``atomic_output`` takes it: a ``file://`` URI as its path, a path or URI as text.

    A URI that cannot be used at all (an unknown scheme, the fleet extra missing) is an OptionError now,
    before anything is read.
    """
    named = [None if name is None else local_name(os.fspath(name)) for name in names]
    for name in named:
        if name is not None and is_uri(name):
            _filesystem(name)
    return named


def reason(error: BaseException) -> str:
    """What went wrong, in a line: the store's own words where it gave some."""
    if isinstance(error, FileNotFoundError):
        return "no such bucket" if "bucket" in str(error).lower() else "no such object"
    if isinstance(error, PermissionError):
        return "access denied"
    text = str(error.args[1] if isinstance(error, OSError) and len(error.args) > 1 else error) or type(error).__name__
    return " ".join(text.split())


def expand(name: str, skip_suffixes: tuple[str, ...] = ()) -> tuple[list[str], list[tuple[str, str]]]:
    """The objects ``name`` stands for, and the problems met (each the URI and the reason).

    A pattern goes through the store's listing; a prefix ending in ``/`` is walked like a directory
    (sorted, hidden names and ``skip_suffixes`` skipped); anything else is one object, opened (and found
    missing) later: a long list of objects costs no listing. A name with ``*``, ``?`` or ``[`` is a
    pattern only where no object or prefix has that very name (``is_pattern``: one request more).
    """
    filesystem, path = _filesystem(name)
    scheme = name.partition("://")[0]
    try:
        if is_pattern(path, filesystem.exists):
            found = filesystem.glob(path, detail=True)
            matches = sorted(key for key, info in found.items() if info.get("type") == "file")
            nothing = "no object matches this pattern"
        elif name.endswith("/"):
            base = path.rstrip("/")
            matches = [
                key
                for key in sorted(filesystem.find(base))
                if not key.endswith("/") and not any(part.startswith(".") for part in key[len(base) :].split("/"))
            ]
            nothing = "no objects under this prefix"
        else:
            return [name], []
        if not matches:
            missing = not filesystem.exists(path.partition("/")[0])
            return [], [(name, "no such bucket" if missing else nothing)]
    except Exception as exc:  # noqa: BLE001 - the store's errors have many types; each is named with its URI
        return [], [(name, f"cannot list: {reason(exc)}")]
    return [f"{scheme}://{key}" for key in matches if not key.endswith(skip_suffixes)], []


def resolve(name: str, skip_suffixes: tuple[str, ...] = ()) -> str | tuple[list[str], list[tuple[str, str]]]:
    """A path to take as paths are (``name``, or what a ``file://`` URI names), or a store URI's ``expand``."""
    if not is_uri(name):
        return name
    local = local_name(name)
    return local if local != name else expand(name, skip_suffixes)


def identity(uri: str) -> str:
    """The canonical URI of an object, for telling inputs apart: one scheme per store, no repeated ``/``."""
    scheme, _, rest = uri.partition("://")
    canonical = {"s3a": "s3", "gcs": "gs"}.get(scheme.lower(), scheme.lower())
    return f"{canonical}://{re.sub('/+', '/', rest)}"


def size(uri: str) -> int:
    """The bytes of the object ``uri`` (not ``file://``) as its store lists them (0 if it cannot say), for progress."""
    try:
        filesystem, path = _filesystem(uri)
        return int(filesystem.size(path) or 0)
    except Exception:  # noqa: BLE001 - a progress figure: the run itself names what cannot be read
        return 0


class _Reader(io.RawIOBase):
    """An object read in blocks, its errors an OSError that names it (as a local file's are)."""

    def __init__(self, handle: Any, uri: str) -> None:
        self._handle = handle
        self._uri = uri

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._handle.read(len(buffer))
        except Exception as exc:  # noqa: BLE001 - see expand
            raise OSError(f"{self._uri}: cannot read: {reason(exc)}") from None
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return int(self._handle.seek(offset, whence))

    def tell(self) -> int:
        return int(self._handle.tell())

    def close(self) -> None:
        if not self.closed:
            with suppress(Exception):
                self._handle.close()
        super().close()


def open_input(uri: str) -> IO[bytes]:
    """The object ``uri`` opened for reading, streamed in blocks; InputError names it and says why not."""
    filesystem, path = _filesystem(uri)
    try:
        handle = filesystem.open(path, "rb", block_size=READ_BLOCK_BYTES, cache_type="readahead")
    except IsADirectoryError:
        raise InputError(f"{uri}: is a prefix (a directory), not an object") from None
    except Exception as exc:  # noqa: BLE001 - see expand
        raise InputError(f"{uri}: cannot open: {reason(exc)}") from None
    return io.BufferedReader(_Reader(handle, uri), 1 << 20)


class _Writer:
    """An object being written: its write errors name it."""

    def __init__(self, handle: Any, uri: str) -> None:
        self._handle = handle
        self.name = uri

    def write(self, data: Any) -> int:
        try:
            return int(self._handle.write(data))
        except Exception as exc:  # noqa: BLE001 - see expand
            raise OutputError(f"{self.name}: cannot write: {reason(exc)}") from None

    def flush(self) -> None:
        """Nothing to do: a part is sent once it is full, and the object is made whole at the end."""


@contextmanager
def new_object(uri: str) -> Iterator[IO[bytes]]:
    """A stream whose content becomes the object ``uri`` once the block completes, never before.

    On any error or stop (a BaseException) the upload is aborted: no object is made, an existing one
    is left as it was.
    """
    filesystem, path = _filesystem(uri)
    if not path.strip("/") or path.endswith("/"):
        raise OutputError(f"{uri}: names a bucket or a prefix; name an object")
    try:
        handle = filesystem.open(path, "wb", block_size=WRITE_BLOCK_BYTES, autocommit=False)
    except Exception as exc:  # noqa: BLE001 - see expand
        raise OutputError(f"{uri}: cannot write: {reason(exc)}") from None
    try:
        yield _Writer(handle, uri)  # type: ignore[misc]
        try:
            handle.close()  # the last part is sent: the upload is complete but not yet an object
            handle.commit()
        except Exception as exc:  # noqa: BLE001 - see expand
            raise OutputError(f"{uri}: cannot write: {reason(exc)}") from None
    except BaseException:
        with suppress(Exception):  # the error that ended the block is the one to report
            handle.discard()
        handle.closed = True  # never closed again (at garbage collection): that would send what is left
        raise
