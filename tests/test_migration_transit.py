"""Records damaged in transit (issue 32, class 2): split over two lines, glued after a progress bar, cut.

The lines are real ones users pasted (sources below), wrapped, glued or cut the ways pastes do it.
A continuation that completes a known wording makes one event naming both lines; a line ending inside
a wording that nothing completes is dead-lettered as a cut record and never read; both lines stay
byte-identical wherever no event is made.
"""

from __future__ import annotations

import io

import orjson
import pytest
from migration_helpers import Taken, migrated, shipped_chain

from kvlog.migration.engine import FileRun, MigrateOptions, Migrator
from kvlog.migration.report import MigrationReport
from kvlog.text.template import GIB

#: guqiong96/Lvllm#35 (vLLM 0.1x, A40)
VLLM = "(EngineCore_DP0 pid=15098) INFO 02-12 08:34:25 [gpu_worker.py:360] Available KV cache memory: 12.57 GiB"
#: sgl-project/sglang#11716
SGLANG = "[2025-10-16 09:06:22 TP5] KV Cache is allocated. #tokens: 2795207, K size: 53.31 GB, V size: 53.31 GB"
#: sgl-project/sglang issues: a tqdm bar whose \r the paste lost, then the server's line
BAR = "  0%|          | 0/13 [00:00<?, ?it/s]"
BATCHES = "Capturing batches (bs=1 avail_mem=23.02 GB):  98%|█████████▊| 50/51 [00:36<00:00,  1.45it/s]"
CAPTURE = "[2025-03-08 12:29:21 TP1] Capture cuda graph begin. This can take up to several minutes. avail mem=1.45 GB"
OTHER = "[2025-10-16 09:06:23 TP5] Memory pool end. avail mem=11.87 GB"
#: a request line: no memory in it
REQUEST = '(APIServer pid=15012) INFO 02-12 08:35:01 [loggers.py:123] "POST /v1/chat/completions HTTP/1.1" 200 OK'


def last_line(event: dict) -> int:
    """The last line of the record an event was read from, as its provenance names it (``continuation-line``)."""
    note = event["migrated"]["inferred"]["last_line"]
    assert note["rule"] == "continuation-line"
    return note["evidence_line"]


def events(out: bytes) -> list[dict]:
    return [orjson.loads(line) for line in out.splitlines() if line.startswith(b"{")]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (VLLM.removesuffix(" GiB"), "GiB"),  # by hand, at a space: the figure and its unit on two lines
        (VLLM.removesuffix(" GiB"), "   GiB"),  # and indented, as markdown keeps it
        (VLLM[:-5], "7 GiB"),  # by a terminal at a fixed width, inside the figure
        (VLLM[:-14], VLLM[-14:]),  # inside the message's words, after one kvlog looks for (``mem``)
    ],
)
def test_a_vllm_record_wrapped_over_two_lines_is_one_event_naming_both(first: str, second: str) -> None:
    out, report, dead = migrated(f"{first}\n{second}\n{REQUEST}\n".encode())
    assert dead == []
    (event,) = events(out)
    assert event["available_bytes"] == round(12.57 * GIB)
    assert (event["migrated"]["line"], last_line(event)) == (1, 2)
    assert out.endswith(f"\n{REQUEST}\n".encode())  # the line after them is their own
    assert out.count(b"\n") == 2 and report.lines == 3


def test_an_sglang_record_wrapped_inside_a_word_is_one_event() -> None:
    out, _, dead = migrated(f"{SGLANG[:-17]}\n{SGLANG[-17:]}\n".encode())
    assert dead == []
    (event,) = events(out)
    assert (event["num_tokens"], event["timestamp"], event["ranks"]) == (2795207, "2025-10-16T09:06:22Z", {"tp": 5})
    assert event["k_bytes"] == event["v_bytes"] == round(53.31 * GIB)
    assert last_line(event) == 2


@pytest.mark.parametrize(
    "cut",
    [
        VLLM.removesuffix("7 GiB"),  # 12.5: a figure at the very end of the line, without its unit
        VLLM.removesuffix(" GiB"),  # 12.57, whole, but its unit gone
        VLLM.removesuffix("B"),  # inside the unit
        VLLM.removesuffix("ory: 12.57 GiB"),  # inside the words, after one kvlog looks for (``mem``)
        SGLANG.removesuffix(" GB"),
    ],
)
def test_a_cut_record_is_dead_lettered_as_cut_and_copied_through(cut: str) -> None:
    data = f"{cut}\n{OTHER}\n".encode()
    out, report, dead = migrated(data)
    assert out.startswith(f"{cut}\n".encode())  # byte for byte
    assert [letter["line"] for letter in dead] == [1]
    assert dead[0]["reason"].startswith("cut record: ")
    assert dead[0]["text"] == cut
    assert report.unparsed_memory_lines == 1


def test_a_line_that_only_begins_as_a_wording_before_a_skipped_value_is_no_cut_of_it() -> None:
    """``Engine {_}: vllm cache_config_info …``: a skipped value takes any text, so ``Engine 000: <any line>``
    is not that wording cut short (it was, for every vLLM engine line no wording reads)."""
    line = "(EngineCore_DP0 pid=15098) INFO 02-12 08:34:25 [core.py:90] Engine 000: moved 3 GiB of weights to host"
    out, _, dead = migrated(f"{line}\n".encode())
    assert out == f"{line}\n".encode()
    unread = "looks like a memory line but matches no known sglang or vllm wording"
    assert [letter["reason"] for letter in dead] == [unread]


def test_a_cut_record_at_the_end_of_the_input_is_never_read() -> None:
    data = VLLM.removesuffix("7 GiB").encode()  # no newline: the file stops inside the figure
    out, _, dead = migrated(data)
    assert (out, [d["reason"][:11] for d in dead]) == (data, ["cut record:"])


def test_a_line_after_a_cut_that_is_a_record_of_its_own_is_not_joined() -> None:
    cut = VLLM.removesuffix(" GiB")
    out, _, dead = migrated(f"{cut}\n{VLLM}\nGiB\n".encode())
    assert [d["line"] for d in dead] == [1]
    (event,) = events(out)
    assert event["migrated"]["line"] == 2 and "last_line" not in event["migrated"].get("inferred", {})
    assert out.startswith(f"{cut}\n".encode()) and out.endswith(b"\nGiB\n")


def test_with_only_events_a_joined_record_is_one_event_and_a_cut_one_dropped() -> None:
    data = f"{VLLM[:-4]}\nGiB\n{SGLANG[:-3]}\n".encode()
    out, report, dead = migrated(data, MigrateOptions(only_events=True))
    (event,) = events(out)
    assert last_line(event) == 2
    assert out.count(b"\n") == 1 and [d["line"] for d in dead] == [3]
    assert report.lines == 3


def test_a_follower_holds_an_open_line_until_the_next_line_comes() -> None:
    taken = Taken()
    run = FileRun(Migrator(shipped_chain(), MigrateOptions()), "ctx.log", MigrationReport(files=1), None, taken)
    run.feed(f"{VLLM[:-4]}\n".encode())
    assert (run.written_lines, taken.records, taken.passed.getvalue()) == (0, [], b"")
    run.feed(b"GiB\n")
    assert run.written_lines == 2
    assert [last_line(record.event) for record in taken.records] == [2]
    assert taken.records[0].raw == f"{VLLM[:-4]}\nGiB\n".encode()  # both lines' bytes, for a rejected record


def test_a_followers_hold_bound_closes_an_open_line() -> None:
    taken, dead = Taken(), []
    run = FileRun(Migrator(shipped_chain(), MigrateOptions()), "ctx.log", MigrationReport(files=1), dead.append, taken)
    run.feed(f"{VLLM[:-4]}\n".encode())
    run.release_through(1, "5 s")
    assert run.written_lines == 1
    assert taken.passed.getvalue() == f"{VLLM[:-4]}\n".encode()
    assert dead[0]["reason"].startswith("cut record: ")


@pytest.mark.parametrize("bar", [BAR, BATCHES])
def test_a_record_glued_after_a_progress_bar_without_its_carriage_return_is_read(bar: str) -> None:
    data = f"{bar}{SGLANG}\n{bar}{CAPTURE}\n".encode()
    out, _, dead = migrated(data)
    assert dead == []
    event, capture = events(out)
    assert event["label"] is None  # the bar and the prefix are not a pool's label
    assert (event["timestamp"], event["ranks"], event["num_tokens"]) == ("2025-10-16T09:06:22Z", {"tp": 5}, 2795207)
    assert event["migrated"]["original"] == f"{bar}{SGLANG}"
    # the capture's free memory (issue 33), read past the bar glued before it
    assert (capture["event"], capture["stage"], capture["label"]) == (
        "cuda_graph.capture_progress",
        "begin",
        "cuda graph",
    )
    assert (capture["ranks"], capture["avail_bytes"]) == ({"tp": 1}, round(1.45 * GIB))
    assert capture["migrated"]["original"] == f"{bar}{CAPTURE}"
    text, _, _ = migrated(data, MigrateOptions(output_format="text"))
    assert text.startswith(bar.encode())  # the bar is kept before the record's wording


@pytest.mark.parametrize("line", [VLLM, SGLANG, OTHER])
def test_no_cut_of_a_real_line_reads_a_figure_the_whole_line_does_not_say(line: str) -> None:
    """Every proper beginning of the line is either no event, or one whose figures are the whole line's."""
    (whole,) = events(migrated(f"{line}\n".encode())[0])
    start = line.index("] ") + 2
    for end in range(start + 1, len(line)):
        out, _, _ = migrated(f"{line[:end]}\n".encode())
        for event in events(out):
            said = {k: v for k, v in event.items() if k.endswith("_bytes") or k.startswith("num_")}
            assert said.items() <= whole.items(), line[:end]


def test_the_record_after_a_joined_pair_keeps_its_own_number() -> None:
    out, _, dead = migrated(f"{VLLM[:-4]}\nGiB\n{OTHER[:-3]}\n".encode())
    assert [d["line"] for d in dead] == [3]
    assert io.BytesIO(out).read().endswith(f"{OTHER[:-3]}\n".encode())


#: vllm-project/vllm#10517: the paste cut the record's start, `# ` of `# GPU blocks: …`
CUT_START = "GPU blocks: 1952, # CPU blocks: 2048"


@pytest.mark.parametrize("line", [CUT_START, f"INFO 12-13 19:54:18 worker.py:243] {CUT_START}"])
def test_a_record_whose_start_lost_no_letter_is_read_saying_what_was_put_back(line: str) -> None:
    out, _, dead = migrated(f"{line}\n{REQUEST}\n".encode())
    assert dead == []
    (event,) = events(out)
    assert (event["event"], event["num_gpu_blocks"], event["num_cpu_blocks"]) == ("kv_pool.capacity", 1952, 2048)
    assert event["migrated"]["original"] == line
    said = event["migrated"]["inferred"]["wording"]
    assert said["rule"] == "cut-start" and "'# ' put back" in said["evidence"]


@pytest.mark.parametrize(
    "line",
    [
        "PU blocks: 1952, # CPU blocks: 2048",  # GPU, TPU, HPU, XPU or NPU: the device is lost
        "INFO 12-13 19:54:18 worker.py:243] blocks: 1952, # CPU blocks: 2048",  # the device's word is lost
        "vailable KV cache memory: 12.57 GiB",  # a letter of the words lost
    ],
)
def test_a_record_whose_start_lost_a_word_is_dead_lettered_as_cut_never_silent(line: str) -> None:
    data = f"{line}\n{REQUEST}\n".encode()
    out, _, dead = migrated(data)
    assert out == data  # byte for byte
    (letter,) = dead
    assert letter["line"] == 1 and letter["reason"].startswith("cut record: the line begins inside the wording ")


@pytest.mark.parametrize(
    "line",
    [
        # vllm-project/vllm#27508 and vllm-ascend#5707: the frames of a failed KV-cache check, each behind a prefix
        '(EngineCore_DP0 pid=223840) ERROR 10-25 13:08:43 [core.py:708]   File "/opt/conda/envs/vllm_env/lib/'
        'python3.13/site-packages/vllm/v1/core/kv_cache_utils.py", line 699, in check_enough_kv_cache_memory',
        '(EngineCore_DP0 pid=1102)   File "/vllm-workspace/vllm/vllm/v1/core/kv_cache_utils.py", line 699, in '
        "check_enough_kv_cache_memory",
        '(EngineCore_DP0 pid=223840) ERROR 10-25 13:08:43 [core.py:708]     raise ValueError("No available memory '
        'for the cache blocks. "',
        '(EngineCore_DP0 pid=1102)     raise ValueError("No available memory for the cache blocks. "',
        '        "Try increasing `gpu_memory_utilization` when initializing the engine (KV cache memory)."',
        # vllm-project/vllm#27508, a later comment: Python 3.13's source lines, markers and elisions
        "(EngineCore_DP0 pid=6880)     kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs,",
        "(EngineCore_DP0 pid=6880)                                             available_gpu_memory)",
        "(EngineCore_DP0 pid=6880)     check_enough_kv_cache_memory(vllm_config, kv_cache_spec_one_worker,",
        "(EngineCore_DP0 pid=6880)     ~~~~~~~~~~~~~~~~~~~~~~~~~~~~^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "(EngineCore_DP0 pid=6880)                                  available_memory_one_worker)",
        "(EngineCore_DP0 pid=6880)     ...<6 lines>...",
    ],
)
def test_a_tracebacks_frames_pass_through_untouched_and_unreported(line: str) -> None:
    data = f"{line}\n".encode()
    out, _, dead = migrated(data)
    assert (out, dead) == (data, [])


@pytest.mark.parametrize(
    "line",
    [
        # sgl-project/sglang#29575's figures, as the bare message of 2024's logs
        "    max_total_num_tokens=2086558, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=33, context_len=256000, available_gpu_mem=17.22 GB",
        "    [2025-10-16 09:06:23 TP5] Memory pool end. avail mem=11.87 GB",
        "    INFO 12-16 02:38:41 gpu_executor.py:113] # GPU blocks: 80, # CPU blocks: 819",
    ],
)
def test_an_indented_memory_line_is_no_tracebacks_source_line(line: str) -> None:
    """Markdown indents pasted logs by four spaces, as Python indents a frame's source: the wording decides."""
    out, _, dead = migrated(f"{line}\n".encode())
    assert dead == [] and len(events(out)) == 1


@pytest.mark.parametrize(
    "line",
    [
        # myoceane's vLLM 0.11 start-up (tests/wild/vllm/myoceane-banner.log): Hugging Face's downloads
        "config.json: 1.81kB [00:00, 5.73MB/s]",
        "model.safetensors.index.json: 36.4kB [00:00, 80.0MB/s]",
        "model-00001-of-00002.safetensors: 100%|##########| 4.98G/4.98G [00:20<00:00, 243MB/s]",
    ],
)
def test_a_downloads_progress_bar_passes_untouched_and_unreported(line: str) -> None:
    data = f"{line}\n".encode()
    out, _, dead = migrated(data)
    assert (out, dead) == (data, [])
