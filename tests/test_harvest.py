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


# --------------------------------------------------------------------------- data flow


def formats(source: str) -> list[str]:
    return sorted(c["format"] for c in calls(source))


def test_a_message_assigned_then_logged_is_followed() -> None:
    # vLLM 0.11-0.26, v1/worker/gpu_worker.py: the start-up line is built in `msg`, then `logger.info(msg)`
    source = """
def compile_or_warm_up_model(self):
    msg = (
        f"Free memory on device "
        f"({format_gib(self.init_snapshot.free_memory)}/"
        f"{format_gib(self.init_snapshot.total_memory)} GiB) on startup. "
        f"Current kv cache memory in use is "
        f"{format_gib(self.available_kv_cache_memory_bytes)} GiB."
    )

    logger.info(msg)
"""
    assert only(source) == {
        "format": "Free memory on device ({format_gib(self.init_snapshot.free_memory)}/"
        "{format_gib(self.init_snapshot.total_memory)} GiB) on startup. "
        "Current kv cache memory in use is {format_gib(self.available_kv_cache_memory_bytes)} GiB.",
        "style": "fstring",
        "args": [],
        "level": "info",
    }


def test_percent_and_format_applied_to_a_name() -> None:
    source = """
def f(n, total):
    fmt = "Total non KV cache memory: %.2f GiB"
    logger.debug(fmt % total)
    template = "{} blocks of {:.2f} GiB"
    logger.info(template.format(n, total))
"""
    found = {c["format"]: c for c in calls(source)}
    assert (
        found["Total non KV cache memory: %.2f GiB"]["style"],
        found["Total non KV cache memory: %.2f GiB"]["args"],
    ) == (
        "percent",
        ["total"],
    )
    assert found["{} blocks of {:.2f} GiB"]["args"] == ["n", "total"]


def test_a_name_logged_with_arguments_is_percent_style() -> None:
    call = only('def f(x):\n    msg = "Reserving %.2f GiB for the KV cache"\n    logger.info(msg, x / GiB)\n')
    assert (call["format"], call["style"], call["args"]) == (
        "Reserving %.2f GiB for the KV cache",
        "percent",
        ["x / GiB"],
    )
    starred = only('def f(args):\n    msg = "free %d of %d blocks"\n    logger.warning(msg, *args)\n')
    assert (starred["style"], starred["args"], starred["level"]) == ("percent", ["*args"], "warning")


def test_concatenation_and_augmented_assignment_grow_the_message() -> None:
    source = """
def f(mem, extra):
    msg = "KV cache: " + f"{mem:.2f} GiB"
    msg += ", reserved"
    if extra:
        msg += f" (+{extra} GiB)"
    logger.info(msg)
"""
    assert formats(source) == ["KV cache: {mem:.2f} GiB, reserved", "KV cache: {mem:.2f} GiB, reserved (+{extra} GiB)"]


def test_implicit_concatenation_and_a_name_spliced_into_an_fstring() -> None:
    source = """
def f(n):
    head = ("max seq len "
            "exceeds the KV cache")
    logger.error(f"{head}: {n} tokens")
"""
    # the f-string as written is kept too (a name may hold at run time what the scope does not show);
    # the harvest's memory filter drops it where its own text names no memory
    assert formats(source) == ["max seq len exceeds the KV cache: {n} tokens", "{head}: {n} tokens"]


def test_branches_give_each_message_and_a_rebinding_forgets_the_string() -> None:
    source = """
def f(ok, n):
    if ok:
        msg = "KV cache fits: %d blocks"
    else:
        msg = "KV cache too small: %d blocks"
    logger.info(msg, n)
    msg = compute()
    logger.info(msg)
"""
    result = hf.extract_calls(source)
    assert sorted(c["format"] for c in result.calls) == ["KV cache fits: %d blocks", "KV cache too small: %d blocks"]
    assert result.skipped == 1


def test_a_string_logged_through_percent_s() -> None:
    source = 'def f(x):\n    msg = f"Available KV cache memory: {x} GiB"\n    logger.info("%s", msg)\n'
    assert only(source)["format"] == "Available KV cache memory: {x} GiB"


def test_a_message_passed_to_a_helper_that_logs_it() -> None:
    # a method whose parameter reaches the logger (sglang's scheduler, vLLM's workers), and a function
    source = """
class Worker:
    def _log(self, message):
        if self.rank == 0:
            logger.info(f"[rank {self.rank}] {message}")

    def run(self, mem):
        text = f"KV cache reserved: {mem:.2f} GiB"
        self._log(text)


def log_once(msg, *args):
    logger.warning(msg, *args)


def g(blocks):
    log_once("%d KV cache blocks", blocks)
    log_once(msg="Total non KV cache memory: %.2f GiB")
"""
    by_format = {c["format"]: c for c in calls(source)}
    assert by_format["[rank {self.rank}] KV cache reserved: {mem:.2f} GiB"]["level"] == "info"
    assert by_format["%d KV cache blocks"] == {
        "format": "%d KV cache blocks",
        "style": "percent",
        "args": ["blocks"],  # the helper's *args, filled from the call
        "level": "warning",
    }
    assert "Total non KV cache memory: %.2f GiB" in by_format


def test_a_progress_bar_description_is_harvested() -> None:
    # sglang 0.5.x piecewise CUDA-graph runner: the tqdm bar's text carries the free memory
    call = only('capture_range.set_description(f"Capturing num tokens ({num_tokens=} {avail_mem=:.2f} GB)")')
    assert (call["format"], call["level"]) == (
        "Capturing num tokens (num_tokens={num_tokens!r} avail_mem={avail_mem:.2f} GB)",
        "tqdm",
    )


def test_sglang_01_rank_line_passes_the_memory_filter() -> None:
    assert hf.is_memory_format("Rank {self.tp_rank}: max_total_num_token={self.max_total_num_token}, ")


def test_an_extraction_change_rereads_sources_from_the_cache(tmp_path: Path) -> None:
    path = tmp_path / "w.whl"
    _build_zip(path, MEMBERS, zip64=False)
    cache = hf.Cache(tmp_path / "cache")
    zf = hf.RangeZip(FileRanges(path), path.stat().st_size)
    wanted = [e for e in zf.entries if hf.wanted_path(e.name, "pkg")]
    assert hf.fetch_zip_members(zf, wanted, cache) == 2
    # the extractor changed: its members' cache is empty, but the sources are kept
    changed = hf.Cache(tmp_path / "cache")
    for e in wanted:
        changed._member_path(e.key).unlink()
    ranges = FileRanges(path)
    zf2 = hf.RangeZip(ranges, path.stat().st_size)
    opened = len(ranges.reads)
    assert hf.fetch_zip_members(zf2, wanted, changed) == 2
    assert len(ranges.reads) == opened


def test_the_text_of_an_object_logged_as_it_is() -> None:
    # vLLM 0.9-0.34: `logger.debug(profile_result)` prints MemoryProfilingResult.__repr__
    source = """
class MemoryProfilingResult:
    def __repr__(self) -> str:
        return (f"Memory profiling takes {self.profile_time:.2f} seconds. "
                f"Total non KV cache memory: "
                f"{(self.non_kv_cache_memory / GiB_bytes):.2f}GiB.")
"""
    assert only(source) == {
        "format": "Memory profiling takes {self.profile_time:.2f} seconds. "
        "Total non KV cache memory: {self.non_kv_cache_memory / GiB_bytes:.2f}GiB.",
        "style": "fstring",
        "args": [],
        "level": "repr",
    }


def test_a_name_interpolated_in_an_fstring_keeps_its_placeholder_beside_the_strings_seen() -> None:
    """sglang prints ``Capture target decode CUDA graph end.`` where the scope binds two other names."""
    source = """
def capture(self, draft):
    capture_name = "draft prefill" if draft else "target prefill"
    logger.info(f"Capture {capture_name} CUDA graph end. mem usage={mem:.2f} GB")
"""
    assert formats(source) == [
        "Capture draft prefill CUDA graph end. mem usage={mem:.2f} GB",
        "Capture target prefill CUDA graph end. mem usage={mem:.2f} GB",
        "Capture {capture_name} CUDA graph end. mem usage={mem:.2f} GB",
    ]


def test_an_exceptions_message_is_harvested_behind_its_name() -> None:
    """vLLM's KV-cache checks raise rather than log: the traceback's last line is ``ValueError: message``."""
    source = """
def check_enough_kv_cache_memory(vllm_config, available_memory):
    if available_memory <= 0:
        raise ValueError("No available memory for the cache blocks. "
                         "Try increasing `gpu_memory_utilization` when "
                         "initializing the engine.")
    if needed_memory > available_memory:
        raise ValueError(
            f"To serve at least one request with the models's max seq len "
            f"({max_model_len}), ({needed_memory/GiB_bytes:.2f} GiB KV "
            f"cache is needed, which is larger than the available KV cache "
            f"memory ({available_memory/GiB_bytes:.2f} GiB).")


def profile(self):
    msg = (f"Error in memory profiling. Initial free memory {GiB(init):.2f} GiB, "
           f"current free memory {GiB(free):.2f} GiB.")
    raise AssertionError(msg)


def profile_v1(self):
    assert self.init_snapshot.free_memory >= free_gpu_memory, (
        "Error in memory profiling. "
        f"Initial free memory {format_gib(init)} GiB, current free memory {format_gib(free)} GiB.")
    assert ok


def other():
    raise ValueError("max seq len (%d) is larger than the KV cache (%d)" % (a, b))
    raise RuntimeError(message, code)  # a tuple: no wording
    raise
"""
    assert sorted((call["format"], call["style"], call["level"]) for call in calls(source)) == [
        (
            "AssertionError: Error in memory profiling. Initial free memory {GiB(init):.2f} GiB, "
            "current free memory {GiB(free):.2f} GiB.",
            "fstring",
            "raise",
        ),
        (
            "AssertionError: Error in memory profiling. Initial free memory {format_gib(init)} GiB, "
            "current free memory {format_gib(free)} GiB.",
            "fstring",
            "raise",
        ),
        (
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine.",
            "plain",
            "raise",
        ),
        (
            "ValueError: To serve at least one request with the models's max seq len ({max_model_len}), "
            "({needed_memory / GiB_bytes:.2f} GiB KV cache is needed, which is larger than the available KV "
            "cache memory ({available_memory / GiB_bytes:.2f} GiB).",
            "fstring",
            "raise",
        ),
        ("ValueError: max seq len (%d) is larger than the KV cache (%d)", "percent", "raise"),
    ]
