"""Names a package exports but imports only when first used.

``import kvlog`` must stay cheap (``kvlog validate`` starts without structlog) and ``kvlog.commands``
must not load the migration engine for ``kvlog validate``; yet both packages export those names. A
module ``__getattr__`` (PEP 562) made here imports the owning module on first use and caches the
value in the package, so later look-ups never come back.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, owners: Mapping[str, str]) -> Callable[[str], Any]:
    """A ``__getattr__`` for ``package`` that imports ``name`` from the module ``owners[name]``."""
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        owner = owners.get(name)
        if owner is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(owner), name)
        namespace[name] = value
        return value

    return __getattr__
