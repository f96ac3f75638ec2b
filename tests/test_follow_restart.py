"""``kvlog follow --state``: killed at any moment and restarted, the follower neither loses nor repeats an event."""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from cli_harness import SCRIPT
from follow_helpers import DATED_LOGS, append, canonical, corpus_text, lines_of, migrated, wait_for

KVLOG = str(SCRIPT)
KILLS = 50


class Writer(threading.Thread):
    """A server writing its log in random pieces (some ending inside a line), rotating it by rename once."""

    def __init__(self, log: Path, text: str, rotate_at: int, seed: int) -> None:
        super().__init__(daemon=True)
        self.log, self.data, self.rotate_at, self.rng = log, text.encode(), rotate_at, random.Random(seed)
        self.rotated = log.with_name(log.name + ".1")

    def run(self) -> None:
        at = 0
        while at < len(self.data):
            if at <= self.rotate_at < at + 400:
                end = self.data.index(b"\n", self.rotate_at) + 1  # rotate between two lines, as logrotate's reopen does
                append(self.log, self.data[at:end])
                self.log.rename(self.rotated)
                self.log.touch()
                at = end
                continue
            size = self.rng.randint(1, 400)
            append(self.log, self.data[at : at + size])
            at += size
            time.sleep(self.rng.uniform(0.0, 0.12))


@pytest.mark.slow
def test_killed_at_50_random_moments_the_restarted_follower_loses_and_repeats_no_event(tmp_path: Path) -> None:
    log, out, state = tmp_path / "server.log", tmp_path / "events.jsonl", tmp_path / "state.json"
    log.touch()
    text = corpus_text(*DATED_LOGS) * 3
    writer = Writer(log, text, rotate_at=len(text) // 2, seed=13)
    rng = random.Random(7)
    command = [KVLOG, "follow", str(log), "--state", str(state), "-o", str(out)]
    writer.start()
    for _ in range(KILLS):
        process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, 1.2))  # during start-up, the re-read, a write, a state save or a wait
        process.send_signal(signal.SIGKILL)
        process.wait()
    writer.join(120)
    assert not writer.is_alive()
    expected = canonical(migrated(writer.rotated)) + canonical(migrated(log))
    process = subprocess.Popen(command, stderr=subprocess.PIPE)
    wait_for(lambda: sum(canonical(lines_of(out)).values()) >= sum(expected.values()), 60, "every event")
    time.sleep(0.5)  # anything repeated would arrive now
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    got = canonical(lines_of(out))
    assert got - expected == Counter(), "repeated or invented events"
    assert expected - got == Counter(), "lost events"
