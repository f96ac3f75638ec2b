"""The public API is pinned: what each documented module exports, and nothing it shows besides.

As httpx's ``tests/test_exported_members.py``: a name joins or leaves the API only by a change of
this list, the README's "Public API" section and the CHANGELOG together. Each package's ``__all__``
is the list; every name in it resolves (the lazily imported ones included); and a package shows no
kvlog class or function of its own that it does not export, so a new one cannot become API by
accident (an implementation module such as ``kvlog.emission`` is held to its ``__all__`` only).
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

PUBLIC_API = {
    "kvlog": [
        "KvlogError",
        "SchemaViolationError",
        "__version__",
        "bind_ranks",
        "configure",
        "emit",
        "formatter",
        "get_logger",
    ],
    "kvlog.check": [
        "CheckOptions",
        "CheckReport",
        "Draft",
        "Finding",
        "RULES",
        "Reason",
        "Verdict",
        "compare",
        "run_check",
    ],
    "kvlog.commands": [
        "BrokenMigrations",
        "CheckOutcome",
        "CommandOutcome",
        "ENGINES",
        "EXIT_BROKEN_MIGRATIONS",
        "EXIT_ERROR",
        "EXIT_FINDINGS",
        "EXIT_OK",
        "FollowOutcome",
        "InputFailure",
        "LedgerOutcome",
        "MigrateOutcome",
        "OptionError",
        "PlotOutcome",
        "SummarizeOutcome",
        "ValidateOutcome",
        "check",
        "exit_status_of",
        "follow",
        "integrate",
        "ledger",
        "migrate",
        "plot",
        "summarize",
        "validate",
    ],
    "kvlog.emission": [
        "EmissionConfig",
        "bind_ranks",
        "configure",
        "emit",
        "formatter",
        "get_config",
        "get_logger",
        "lost_events",
        "restore",
    ],
    "kvlog.errors": [
        "CatalogError",
        "KvlogError",
        "NamesOptions",
        "OptionError",
        "SchemaViolationError",
        "UnknownEventError",
        "worded",
    ],
    "kvlog.nvml": [
        "MAX_LAG_S",
        "DeviceSample",
        "NvmlSampler",
        "SamplingError",
        "MeasuredState",
        "measured_state",
        "open_sampler",
    ],
    "kvlog.memory": [
        "ArenaChange",
        "ArenaError",
        "Backend",
        "BackendError",
        "HostBackend",
        "HostKVPool",
        "KVPool",
        "KVShape",
        "MHAKVPool",
        "MLAKVPool",
        "Measurement",
        "PinningError",
        "PoolSizingError",
        "PoolStateError",
        "SWAKVPool",
        "VmmArena",
    ],
    "kvlog.metrics": [
        "METRICS",
        "Device",
        "LedgerFigures",
        "MemorySeries",
        "Metric",
        "MetricsEndpointError",
        "MetricsExtraMissing",
        "process_device",
        "serve",
        "start_endpoint",
    ],
    "kvlog.migration": ["Chain", "MigrationError", "Record", "Step", "load_chain"],
    "kvlog.otel": ["OtelExport", "OtelExtraMissing", "export"],
    "kvlog.testing": ["capture_events"],
}
#: modules whose namespace is their API (a package's ``__init__``, a module of public names only)
EXPORTERS = sorted(set(PUBLIC_API) - {"kvlog.emission"})


def _module(name: str) -> ModuleType:
    if name == "kvlog.memory":
        pytest.importorskip("torch")
    return importlib.import_module(name)


@pytest.mark.parametrize("name", sorted(PUBLIC_API))
def test_the_exports_are_the_pinned_list(name: str) -> None:
    assert sorted(_module(name).__all__) == sorted(PUBLIC_API[name])


@pytest.mark.parametrize("name", sorted(PUBLIC_API))
def test_every_export_resolves(name: str) -> None:
    module = _module(name)
    missing = [export for export in module.__all__ if not hasattr(module, export)]
    assert missing == [], f"{name} exports names it cannot give: {missing}"


def _own(module: ModuleType, value: object) -> bool:
    """Whether ``value`` is a kvlog class or function of ``module`` (or of a module inside it)."""
    owner = getattr(value, "__module__", None)
    return isinstance(owner, str) and (owner == module.__name__ or owner.startswith(f"{module.__name__}."))


@pytest.mark.parametrize("name", EXPORTERS)
def test_no_public_name_goes_unexported(name: str) -> None:
    module = _module(name)
    shown = sorted(
        attribute
        for attribute, value in vars(module).items()
        if not attribute.startswith("_") and not isinstance(value, ModuleType) and _own(module, value)
    )
    assert sorted(set(shown) - set(module.__all__)) == [], f"{name} shows names its __all__ leaves out"
