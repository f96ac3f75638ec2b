"""``kvlog demo`` as users run it: a real pipe into ``kvlog validate -``, and the console in process."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

from cli_harness import PYTHON_M_KVLOG, kvlog_text

from kvlog.demo import run_demo
from kvlog.emission import emit, get_config, restore
from kvlog.events import KvArenaClosed
from kvlog.testing import capture_events

KVLOG = PYTHON_M_KVLOG


def test_demo_json_piped_into_validate_is_valid_and_tells_the_post_capture_story(tmp_path: Path) -> None:
    log = tmp_path / "demo.jsonl"
    kvlog = " ".join(shlex.quote(part) for part in KVLOG)
    pipeline = f"{kvlog} demo --format json | tee {shlex.quote(str(log))} | {kvlog} validate -"
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", pipeline], check=False, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert f"{len(events)} events, 0 invalid" in result.stderr
    assert f"kvlog demo: {len(events)} events emitted" in result.stderr

    story = [
        (e["event"], e.get("label"), e.get("allocation_state"))
        for e in events
        if e["event"].startswith("kv_pool.") or e["event"] == "kv_host_pool.allocation"
    ]
    assert story == [
        ("kv_pool.allocation", None, "va_upper_bound"),
        ("kv_pool.allocation", "SWA", "va_upper_bound"),
        ("kv_pool.allocation", "Full", "va_upper_bound"),
        ("kv_pool.swa_summary", None, "va_upper_bound"),
        ("kv_pool.post_capture_sized", None, None),
        ("kv_pool.allocation", None, "allocated"),
        ("kv_pool.post_capture_sized", None, None),
        ("kv_pool.allocation", "SWA", "allocated"),
        ("kv_pool.allocation", "Full", "allocated"),
        ("kv_pool.swa_summary", None, "allocated"),
        ("kv_pool.sleep", None, None),
        ("kv_pool.wake", None, None),
        ("kv_host_pool.allocation", "kv", None),
    ]
    arenas = Counter(e["arena_id"] for e in events if e["event"] in ("kv_arena.ready", "kv_arena.closed"))
    assert len(arenas) == 4 and set(arenas.values()) == {2}  # every arena opened is closed
    operations = [e for e in events if e["event"] in ("kv_arena.commit", "kv_arena.decommit")]
    assert operations and all(e["measured_committed_bytes"] == e["committed_bytes"] for e in operations)
    assert all(e["ranks"] == {"tp": 0} for e in events)
    assert not any(e["event"] == "kv_arena.error" for e in events)


def test_demo_console_prints_sglang_style_lines_for_people() -> None:
    saved = get_config()  # the demo configures emission for its own output: the next test gets it back
    try:
        result = kvlog_text("demo")
    finally:
        restore(saved)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(line.startswith("[") and " TP0] " in line for line in lines)
    text = result.stdout
    assert "KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 131072" in text
    assert "Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: " in text
    assert "SWAKVPool VA upper bound:" in text and "SWAKVPool mem usage:" in text
    assert "asleep: freed=" in text and "discrepancy=0 B" in text
    assert "hierarchical KV host pool" in text
    assert f"kvlog demo: {len(lines)} events emitted, all valid against the catalog" in result.stderr


def test_the_demos_console_migrates_back_to_valid_events_sleep_and_wake_included(tmp_path: Path) -> None:
    """Every line the demo prints for people is an event again (the sleep and wake lines were dead-lettered)."""
    saved = get_config()
    try:
        console = kvlog_text("demo").stdout
    finally:
        restore(saved)
    letters = tmp_path / "dead.jsonl"
    options = ("--only-events", "--validate-all", "--dead-letter", letters)
    done = kvlog_text("migrate", *options, "-", stdin=console.encode())
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    dead = [json.loads(line) for line in letters.read_text().splitlines()]
    assert [d for d in dead if not d["text"].startswith("  ")] == []  # only the demo's indented was/now asides
    assert len(events) == len([line for line in console.splitlines() if line.startswith("[")])
    sleep, wake = (next(e for e in events if e["event"] == name) for name in ("kv_pool.sleep", "kv_pool.wake"))
    for event in (sleep, wake):
        assert event["pool"] == "MHAKVPool" and event["arena_ids"] == []
        assert event["migrated"]["inferred"]["arena_ids"]["rule"] == "arenas-not-on-line"


def test_demo_without_torch_says_which_extra_to_install() -> None:
    code = "import sys; sys.modules['torch'] = None; from kvlog.cli import main; main(['demo'])"
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2  # an extra missing, as for kvlog plot
    assert (
        result.stderr == "kvlog demo: the demo runs the memory runtime, which needs torch: pip install 'kvlog[torch]'\n"
    )


def test_run_demo_returns_how_many_events_it_wrote() -> None:
    stream = io.StringIO()
    count = run_demo("console", stream)
    lines = stream.getvalue().splitlines()
    assert count == len(lines) > 20
    assert any(" commit: ranges=" in line for line in lines), "a pool commits its buffers in one batch, one event"
    assert any(" decommit: ranges=" in line for line in lines), "a sleep gives back every run in one batch, one event"


def test_the_demo_leaves_the_callers_ranks_as_they_were() -> None:
    saved = get_config()
    try:
        run_demo("console", io.StringIO())
        with capture_events() as captured:
            emit(KvArenaClosed(arena_id="4242_0", released_bytes=2097152))
    finally:
        restore(saved)
    (event,) = captured
    assert "ranks" not in event, "the demo's tp=0 belongs to its own events, not to the caller's next one"
