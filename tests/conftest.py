"""Settings every test shares.

Nothing is kept across runs (``kvlog.schema.stored``) unless a test sets ``KVLOG_CACHE_DIR`` itself:
what a test checks is then computed by the code under test, never read back from an earlier run, an
earlier checkout or an earlier mutant of it. Subprocesses inherit the setting.
"""

import os

os.environ["KVLOG_CACHE_DIR"] = ""

# How a test runs the CLI, in process or as a process: tests/cli_harness.py (TESTING.md says when).
