"""Negative figures (issue 32, class 3): what people paste into bug reports when the model does not fit.

vLLM computes ``Available KV cache memory`` as the budget less what the model needs
(``requested_memory - non_kv_cache_memory``) and prints it before refusing to start; sglang's NPU
budget line is a difference too. ``kv_pool.memory_available`` v2 reads the sign and says ``deficit``.
Figures that are no difference (free memory) keep refusing a sign: nothing is read that a server
cannot print. The lines are real ones (sources below).
"""

from __future__ import annotations

import orjson
import pytest
from migration_helpers import migrated

from kvlog.migration.engine import MigrateOptions
from kvlog.text.template import GIB

#: (pasted line, the figure it prints in GiB)
PASTED = [
    # a troubleshooting page of a vLLM deployment guide
    ("INFO 08-25 09:12:34 [gpu_worker.py:276] Available KV cache memory: -2.16 GiB", "-2.16"),
    # a test fixture quoting vLLM 0.14's format_gib, which drops a trailing zero
    ("(EngineCore_DP0 pid=15098) INFO 02-12 08:34:25 [gpu_worker.py:360] Available KV cache memory: -0.7 GiB", "-0.7"),
    # a startup-robustness note quoting the crash it retried
    (
        "(VllmWorker rank=0 pid=1430) INFO 09-03 00:40:53 [gpu_worker.py:276] Available KV cache memory: -54.87 GiB",
        "-54.87",
    ),
]
HALF_CENTI_GIB = 5368710  # what two decimals of GiB hide, rounded up


def event_of(out: bytes) -> dict:
    (line,) = [line for line in out.splitlines() if line.startswith(b"{")]
    return orjson.loads(line)


@pytest.mark.parametrize(("line", "gib"), PASTED)
def test_a_negative_kv_budget_is_read_with_its_sign_and_said_a_deficit(line: str, gib: str) -> None:
    out, _, dead = migrated(f"{line}\n".encode())
    assert dead == []
    event = event_of(out)
    assert (event["event"], event["schema_version"], event["deficit"]) == ("kv_pool.memory_available", 2, True)
    assert event["available_bytes"] == round(float(gib) * GIB)
    assert event["available_bytes"] < 0
    assert event["migrated"]["uncertainty_bytes"] == {"available_bytes": HALF_CENTI_GIB}


def test_a_positive_budget_is_no_deficit() -> None:
    out, _, _ = migrated(b"INFO 08-25 09:12:34 [gpu_worker.py:276] Available KV cache memory: 12.57 GiB\n")
    assert event_of(out)["deficit"] is False


def test_a_deficit_has_no_v1_form_and_is_copied_through_as_read() -> None:
    line = f"{PASTED[0][0]}\n".encode()
    out, report, dead = migrated(line, MigrateOptions(to_catalog=1))
    assert out == line
    assert report.rejected == 1 and "available_bytes" in dead[0]["reason"]
    positive = b"INFO 08-25 09:12:34 [gpu_worker.py:276] Available KV cache memory: 12.57 GiB\n"
    event = event_of(migrated(positive, MigrateOptions(to_catalog=1))[0])
    assert (event["schema_version"], "deficit" in event, event["migrated"]["lost"]) == (1, False, ["deficit"])


def test_a_v1_event_upgraded_says_no_deficit() -> None:
    v1 = (
        b'{"event": "kv_pool.memory_available", "schema_version": 1, "timestamp": "2025-06-01T10:00:05Z", '
        b'"level": "info", "available_bytes": 66035122176}\n'
    )
    event = event_of(migrated(v1)[0])
    assert (event["schema_version"], event["deficit"]) == (2, False)


def test_kvlogs_own_text_line_of_a_deficit_reads_back() -> None:
    text, _, _ = migrated(f"{PASTED[0][0]}\n".encode(), MigrateOptions(output_format="text"))
    assert b"The available memory for KV cache is -2.16 GB." in text
    again = event_of(migrated(text)[0])
    assert (again["available_bytes"], again["deficit"]) == (round(-2.16 * GIB), True)


def test_free_memory_is_no_difference_and_takes_no_sign() -> None:
    """sglang's ``avail mem`` is what the device reports free: a sign there is no line sglang prints."""
    line = (
        b"[2025-07-22 06:18:33 TP5] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
        b"avail mem=-1.25 GB, mem usage=15.06 GB.\n"
    )
    out, _, dead = migrated(line)
    assert out == line and len(dead) == 1


def test_a_negative_figure_cut_before_its_unit_is_a_cut_record() -> None:
    line = b"INFO 08-25 09:12:34 [gpu_worker.py:276] Available KV cache memory: -2.1\n"
    out, _, dead = migrated(line)
    assert out == line and dead[0]["reason"].startswith("cut record: ")
