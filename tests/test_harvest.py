"""Tests for scripts/harvest_formats.py, the maintainer harvest of old log formats.

The script is not a package module, so it is loaded from its path. No network: the
zip reader is driven by a local file, which is why it takes a range callable.
"""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "harvest_formats.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("harvest_formats", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


hf = _load()


def calls(source: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = hf.extract_calls(source).calls
    return result


def only(source: str) -> dict[str, Any]:
    found = calls(source)
    assert len(found) == 1, found
    return found[0]


# --------------------------------------------------------------------------- extraction


def test_fstring_keeps_expression_conversion_and_spec() -> None:
    call = only('logger.info(f"KV size: {k_size / GB:.2f} GB, dtype={self.dtype!r}, w={x:>{width}}")')
    assert call == {
        "format": "KV size: {k_size / GB:.2f} GB, dtype={self.dtype!r}, w={x:>{width}}",
        "style": "fstring",
        "args": [],
        "level": "info",
    }


def test_fstring_literal_braces_stay_escaped() -> None:
    assert only('logger.info(f"{{a}} {b}")')["format"] == "{{a}} {b}"


def test_percent_style_logger_args() -> None:
    call = only('self.logger.warning("free %d of %.2f GB", num_free, total / GB, exc_info=True)')
    assert call == {
        "format": "free %d of %.2f GB",
        "style": "percent",
        "args": ["num_free", "total / GB"],
        "level": "warning",
    }


def test_percent_operator_with_tuple_and_single_operand() -> None:
    assert only('logging.error("a %s b %s" % (x, y.z))')["args"] == ["x", "y.z"]
    call = only('log.debug("only %s" % value)')
    assert (call["style"], call["args"], call["level"]) == ("percent", ["value"], "debug")


def test_logger_log_skips_the_level_argument() -> None:
    call = only('logger.log(logging.INFO, "blocks %d", n)')
    assert (call["format"], call["args"], call["level"]) == ("blocks %d", ["n"], "log")


def test_format_method_records_positional_and_keyword_args() -> None:
    call = only('logger.info("{} blocks, {name}".format(n, name=m))')
    assert call == {"format": "{} blocks, {name}", "style": "format", "args": ["n", "name=m"], "level": "info"}


def test_plus_concatenation_joins_parts() -> None:
    call = only('logger.info("Memory: " + f"{used:.1f} GB" + " of " + str(total))')
    assert call["format"] == "Memory: {used:.1f} GB of {str(total)}"
    assert call["style"] == "fstring"
    assert only('logger.info("a " "b" + "c")') == {"format": "a bc", "style": "plain", "args": [], "level": "info"}


def test_non_string_message_is_skipped_and_counted() -> None:
    result = hf.extract_calls("logger.info(msg)\nlogger.warning(a + b)\nlogger.info('ok')\n")
    assert [c["format"] for c in result.calls] == ["ok"]
    assert result.skipped == 2


def test_print_and_once_helpers() -> None:
    found = calls(
        "print(f'mem {m} GB')\n"
        "print('blocks:', n, 'free')\n"
        "print_warning_once('warn once')\n"
        "logger.info_once('info %s', x)\n"
        "init_logger(__name__).debug('chained')\n"
        "self._logger.error('underscore')\n"
        "log_info_on_rank0(logger, f'rank0 {y}')\n"
        "math.log(3)\n"
        "warnings.warn('not a logger')\n"
    )
    by_level = {c["level"]: c["format"] for c in found}
    assert by_level == {
        "print": by_level["print"],
        "print_warning_once": "warn once",
        "info_once": "info %s",
        "error": "underscore",
        "log_info_on_rank0": "rank0 {y}",
    }
    assert sorted(c["format"] for c in found if c["level"] == "print") == ["blocks: {n} free", "mem {m} GB"]


def test_unparsable_source_is_flagged() -> None:
    result = hf.extract_calls("def broken(:\n")
    assert result.error and result.calls == []


# --------------------------------------------------------------------------- filter


@pytest.mark.parametrize(
    "text",
    [
        "KV Cache is allocated. #tokens: {size}, K size: {k_size / GB:.2f} GB",
        "# GPU blocks: %d, # CPU blocks: %d",
        "Maximum concurrency for %s tokens per request: %.2fx",
        "Available KV cache memory: {available_kv_cache_memory:.2f} GiB",
        "Sleep mode freed %.2f GiB memory",
        "CuMemAllocator: sleep",
        "[unified-memory-pool] total_bytes=%d",
        "max_total_num_tokens={self.max_total_num_tokens}",
        "avail mem={after:.2f}GB",
    ],
)
def test_memory_filter_keeps_memory_lines(text: str) -> None:
    assert hf.is_memory_format(text)


@pytest.mark.parametrize("text", ["Started server process", "Using {backend} attention backend", "remember me"])
def test_memory_filter_drops_unrelated_lines(text: str) -> None:
    assert not hf.is_memory_format(text)


def test_memory_filter_looks_at_percent_args() -> None:
    assert hf.is_memory_format("Using %s", ["self.mem_fraction_static"])


def test_wanted_path() -> None:
    assert hf.wanted_path("vllm/worker/worker.py", "vllm")
    assert not hf.wanted_path("vllm/tests/test_x.py", "vllm")
    assert not hf.wanted_path("sglang/test/runner.py", "sglang")
    assert not hf.wanted_path("sglang/benchmarks/x.py", "sglang")
    assert not hf.wanted_path("vllm/examples/x.py", "vllm")
    assert not hf.wanted_path("vllm/_C.so", "vllm")
    assert not hf.wanted_path("other/x.py", "vllm")


def test_version_order_is_pep440() -> None:
    versions = ["0.4.10", "0.4.1.post1", "0.4.1", "0.4.1rc1", "0.4.1.dev2", "0.10.0"]
    assert sorted(versions, key=hf.version_key) == [
        "0.4.1.dev2",
        "0.4.1rc1",
        "0.4.1",
        "0.4.1.post1",
        "0.4.10",
        "0.10.0",
    ]


# --------------------------------------------------------------------------- zip by ranges


class FileRanges:
    """A local stand-in for HTTP range requests, counting them."""

    def __init__(self, path: Path) -> None:
        self.data = path.read_bytes()
        self.reads: list[tuple[int, int]] = []

    def __call__(self, start: int, end: int) -> bytes:
        assert 0 <= start <= end <= len(self.data)
        self.reads.append((start, end))
        return self.data[start:end]


MEMBERS = {
    "pkg/a.py": "logger.info(f'KV cache {n} GB')\n" * 50,
    "pkg/b.py": "import os\n",
    "pkg/tests/t.py": "print('x')\n",
    "pkg/data.bin": "\0" * 100_000,
}


def _build_zip(path: Path, members: dict[str, str], *, zip64: bool) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for i, (name, text) in enumerate(members.items()):
            method = zipfile.ZIP_STORED if i % 2 else zipfile.ZIP_DEFLATED
            info = zipfile.ZipInfo(name)
            info.compress_type = method
            with zf.open(info, "w", force_zip64=zip64) as handle:
                handle.write(text.encode())


@pytest.mark.parametrize("zip64", [False, True])
def test_range_zip_reads_members(tmp_path: Path, zip64: bool) -> None:
    path = tmp_path / "w.whl"
    _build_zip(path, MEMBERS, zip64=zip64)
    ranges = FileRanges(path)
    zf = hf.RangeZip(ranges, path.stat().st_size)
    assert sorted(e.name for e in zf.entries) == sorted(MEMBERS)
    wanted = [e for e in zf.entries if hf.wanted_path(e.name, "pkg")]
    assert sorted(e.name for e in wanted) == ["pkg/a.py", "pkg/b.py"]
    groups = zf.plan(wanted)
    assert len(groups) == 1  # neighbours are coalesced into one request
    before = len(ranges.reads)
    contents = zf.read_group(groups[0])
    assert len(ranges.reads) == before + 1
    assert {k: v.decode() for k, v in contents.items()} == {n: MEMBERS[n] for n in ("pkg/a.py", "pkg/b.py")}


def test_range_zip_splits_far_members(tmp_path: Path) -> None:
    path = tmp_path / "w.whl"
    _build_zip(path, {"pkg/a.py": "a = 1\n", "pkg/big.bin": "x" * 400_000, "pkg/c.py": "c = 1\n"}, zip64=False)
    zf = hf.RangeZip(FileRanges(path), path.stat().st_size)
    py = [e for e in zf.entries if e.name.endswith(".py")]
    assert len(zf.plan(py, max_gap=1024)) == 2


def test_zip64_end_record_is_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # zipfile writes the ZIP64 end records past 65535 entries; lowering the limit gets them cheaply
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 1)
    path = tmp_path / "w.whl"
    _build_zip(path, MEMBERS, zip64=True)
    assert b"PK\x06\x06" in path.read_bytes()
    zf = hf.RangeZip(FileRanges(path), path.stat().st_size)
    wanted = [e for e in zf.entries if hf.wanted_path(e.name, "pkg")]
    contents = zf.read_group([e for g in zf.plan(wanted) for e in g])
    assert contents["pkg/a.py"].decode() == MEMBERS["pkg/a.py"]


def test_cached_member_costs_no_range_read(tmp_path: Path) -> None:
    path = tmp_path / "w.whl"
    _build_zip(path, MEMBERS, zip64=False)
    cache = hf.Cache(tmp_path / "cache")
    first = FileRanges(path)
    zf = hf.RangeZip(first, path.stat().st_size)
    wanted = [e for e in zf.entries if hf.wanted_path(e.name, "pkg")]
    assert hf.fetch_zip_members(zf, wanted, cache) == 2
    cached = cache.get_member(next(e.key for e in wanted if e.name == "pkg/a.py"))
    assert cached is not None and cached["calls"][0]["format"] == "KV cache {n} GB"

    # a later release with the same members, and a fresh cache object over the same directory
    second = FileRanges(path)
    zf2 = hf.RangeZip(second, path.stat().st_size)
    opened = len(second.reads)
    assert hf.fetch_zip_members(zf2, wanted, hf.Cache(tmp_path / "cache")) == 0
    assert len(second.reads) == opened

    # one changed member: only it is read
    changed = dict(MEMBERS, **{"pkg/b.py": "import sys\n"})
    path2 = tmp_path / "w2.whl"
    _build_zip(path2, changed, zip64=False)
    third = FileRanges(path2)
    zf3 = hf.RangeZip(third, path2.stat().st_size)
    wanted3 = [e for e in zf3.entries if hf.wanted_path(e.name, "pkg")]
    opened = len(third.reads)
    assert hf.fetch_zip_members(zf3, wanted3, cache) == 1
    assert len(third.reads) == opened + 1


def test_corrupt_member_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "w.whl"
    _build_zip(path, {"pkg/a.py": "a = 1\n" * 100}, zip64=False)
    ranges = FileRanges(path)
    zf = hf.RangeZip(ranges, path.stat().st_size)
    entry = zf.entries[0]
    bad = hf.ZipEntry(entry.name, entry.crc ^ 1, entry.csize, entry.usize, entry.method, entry.offset, entry.name_len)
    with pytest.raises(hf.HarvestError):
        zf.read_group([bad])
