"""The golden-corpus rule: ``kvlog check`` replays real old logs through the real migration engine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from check_helpers import kvlog

from kvlog.schema.resources import data_dir

CORPUS = Path(__file__).parent / "corpus"


def copy_corpus(tmp_path: Path, *names: str) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in names:
        for path in CORPUS.glob(f"{name}.*"):
            shutil.copy(path, corpus / path.name)
    return corpus


def catalog_copy(tmp_path: Path) -> Path:
    root = tmp_path / "catalog"
    shutil.copytree(data_dir("schemas"), root / "schemas")
    shutil.copytree(data_dir("migrations"), root / "migrations")
    return root


def test_the_project_corpus_replays_clean(tmp_path: Path) -> None:
    done = kvlog("check", "--corpus", str(CORPUS), "--format", "json", cwd=tmp_path)
    corpus_findings = [f for f in json.loads(done.stdout) if f["rule"].startswith("KV5")]
    assert corpus_findings == []
    logs = len(list(CORPUS.glob("*.log")))
    assert logs >= 5
    assert f"{logs} corpus files" in done.stderr


def test_a_memory_line_that_no_longer_migrates_is_named_with_its_line(tmp_path: Path) -> None:
    corpus = copy_corpus(tmp_path, "gen2_2025", "distractors")
    log = corpus / "gen2_2025.log"
    lines = log.read_text().splitlines(keepends=True)
    lines.insert(
        6, "[2025-06-03 11:21:32 TP11] KV Cache is allocated. #tokens: 4194304, K size: 32.00 GB, V size: lots\n"
    )
    log.write_text("".join(lines))
    done = kvlog("check", "--corpus", str(corpus), cwd=tmp_path)
    assert done.returncode == 1
    findings = [line for line in done.stdout.splitlines() if " KV5" in line]
    assert findings == [
        "corpus/gen2_2025.log:7: KV501 error: memory line no longer migrates: looks like a memory line but matches "
        "no known sglang wording: [2025-06-03 11:21:32 TP11] KV Cache is allocated. #tokens: 4194304, "
        "K size: 32.00 GB, V size: lots"
    ]


def test_losing_a_text_generation_breaks_the_corpus(tmp_path: Path) -> None:
    corpus = copy_corpus(tmp_path, "postcapture_before_fix_2026_07")
    root = catalog_copy(tmp_path)
    (root / "migrations" / "sglang-text" / "2026-07-postcapture.toml").unlink()
    done = kvlog("check", str(root), "--corpus", str(corpus), cwd=tmp_path)
    assert done.returncode == 1
    unparsed = [line for line in done.stdout.splitlines() if " KV501 " in line]
    assert unparsed[0] == (
        "corpus/postcapture_before_fix_2026_07.log:5: KV501 error: memory line no longer migrates: looks like a memory "
        "line but matches no known sglang wording: [2026-07-21 09:02:11 TP0] KvVmmArena[0] ready: device=0 "
        "reserved=78.8 GiB granularity=2048 KiB"
    )
    assert all(line.startswith("corpus/postcapture_before_fix_2026_07.log:") for line in unparsed)


def test_an_event_the_catalog_now_rejects_is_reported(tmp_path: Path) -> None:
    corpus = copy_corpus(tmp_path, "gen2_2025")
    root = catalog_copy(tmp_path)
    end = root / "schemas" / "kv_memory.pool_end" / "v1.json"
    schema = json.loads(end.read_text())
    schema["properties"]["avail_bytes"] = {"type": "integer", "minimum": 0, "maximum": 1 << 30}
    end.write_text(json.dumps(schema, indent=2))
    done = kvlog("check", str(root), "--corpus", str(corpus), cwd=tmp_path)
    assert done.returncode == 1
    assert (
        "corpus/gen2_2025.log:8: KV501 error: memory line no longer migrates: the migrated kv_memory.pool_end@1 is "
        "invalid: $.avail_bytes: 9824737690 is greater than the maximum of 1073741824: "
        "[2025-06-03 11:21:32 PP1 TP0] Memory pool end. avail mem=9.15 GB"
    ) in done.stdout.splitlines()


def test_a_distractor_the_corpus_lists_may_stay_unparsed(tmp_path: Path) -> None:
    corpus = copy_corpus(tmp_path, "distractors")
    done = kvlog("check", "--corpus", str(corpus), cwd=tmp_path)
    assert " KV5" not in done.stdout
    (corpus / "distractors.expected.jsonl").unlink()  # without the expectations, every unparsed memory line counts
    done = kvlog("check", "--corpus", str(corpus), cwd=tmp_path)
    assert " KV501 " in done.stdout
