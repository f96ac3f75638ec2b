"""pytest plugin of a mutant's run (loaded with ``-p``): run exactly the tests chosen for the mutant.

``MUTATION_SELECT`` names a file of node ids, one a line, in the order to run them (fastest first, so
a killing test tends to come early under ``-x``). ``MUTATION_KNOWN`` names the file of every node id
the baseline ran: a collected test it does not know (a mutant that renames a parametrised case) runs
too, last. Node ids travel in a file rather than on the command line: any id (brackets, spaces, ``::``
inside a parameter) is matched exactly, and thousands of them fit.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _ids(variable: str) -> list[str]:
    name = os.environ.get(variable)
    return Path(name).read_text().splitlines() if name else []


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = {node_id: index for index, node_id in enumerate(_ids("MUTATION_SELECT"))}
    known = set(_ids("MUTATION_KNOWN"))
    kept = sorted((item for item in items if item.nodeid in wanted), key=lambda item: wanted[item.nodeid])
    unknown = [item for item in items if item.nodeid not in wanted and item.nodeid not in known]
    deselected = [item for item in items if item.nodeid not in wanted and item.nodeid in known]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
    items[:] = kept + unknown
