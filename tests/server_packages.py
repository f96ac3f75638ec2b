"""The logging code of released sglang and vLLM packages, read from PyPI without their GPU dependencies.

Only the members a test needs are fetched, with HTTP range requests into the wheel (vLLM's wheels are
hundreds of megabytes; its logging modules a few kilobytes), by the reader ``scripts/harvest_formats.py``
uses, and kept in ``~/.cache/kvlog-servers`` (``KVLOG_SERVER_CACHE``). Without the network a test that
needs them is skipped, and fails under CI.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("KVLOG_SERVER_CACHE", Path.home() / ".cache" / "kvlog-servers"))


def _tool(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def released_members(project: str, version: str, prefixes: tuple[str, ...]) -> Path:
    """A directory holding the members of ``project==version``'s wheel whose paths start with ``prefixes``."""
    where = CACHE / f"{project}-{version}"
    done = where / ".complete"
    if done.exists():
        return where
    harvest = _tool("harvest_formats")
    try:
        http = harvest.Http()
        index = json.loads(
            http.get(harvest.INDEX_URL.format(project=project), {"Accept": harvest.INDEX_ACCEPT}, expect=200)
        )
        wheels = [
            f
            for f in index["files"]
            if f["filename"].startswith(f"{project}-{version}-") and f["filename"].endswith(".whl")
        ]
        if not wheels:
            pytest.fail(f"{project}=={version} has no wheel on PyPI")
        wheel = wheels[0]
        archive = harvest.RangeZip(http.range_reader(wheel["url"]), int(wheel["size"]))
        wanted = [entry for entry in archive.entries if entry.name.startswith(prefixes)]
        for group in archive.plan(wanted):
            for name, data in archive.read_group(group).items():
                target = where / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
    except harvest.HarvestError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"cannot fetch {project}=={version} from PyPI: {exc}")
        pytest.skip(f"cannot fetch {project}=={version} from PyPI: {exc}")
    done.touch()
    return where


def vllm_logging(version: str) -> Path:
    """A ``sys.path`` entry where ``import vllm.logger`` is the release's own (``vllm/__init__.py`` left empty).

    vLLM's package imports torch and its engine; its logging modules import only ``vllm.envs`` and each other.
    """
    where = released_members("vllm", version, ("vllm/logger.py", "vllm/envs.py", "vllm/logging_utils/"))
    (where / "vllm" / "__init__.py").write_text("")
    return where


def sglang_configure_logger(version: str) -> str:
    """The source of the release's ``configure_logger``, as written.

    ``sglang/srt/utils`` imports torch and most of the server, so the function is lifted out of it (by
    ``ast``), to run beside the names it uses: see ``SGLANG_NAMESPACE``.
    """
    where = released_members("sglang", version, ("sglang/srt/utils.py", "sglang/srt/utils/common.py"))
    module = where / "sglang" / "srt" / "utils" / "common.py"
    if not module.exists():
        module = where / "sglang" / "srt" / "utils.py"
    source = module.read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == "configure_logger":
            return textwrap.dedent(ast.get_source_segment(source, node) or "")
    raise AssertionError(f"sglang=={version} has no configure_logger in {module}")


#: what sglang's module gives ``configure_logger`` besides the standard library (the GPU-only parts absent)
SGLANG_NAMESPACE = """
import json, logging, logging.config, os
from multiprocessing import parent_process
import orjson

class _Flag:
    def __init__(self, name): self.name = name
    def get(self): return os.environ.get(self.name, "false").lower() in ("1", "true")

class envs:
    SGLANG_LOG_MS = _Flag("SGLANG_LOG_MS")

def is_flashinfer_available():  # no GPU here
    return False

def configure_hf_hub_logger():  # routes Hugging Face Hub's own messages; no Hub client here
    pass
"""
