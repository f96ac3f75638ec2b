"""A progress bar of bytes moved (a download, a copy): sizes and rates of a transfer, never memory held.

Hugging Face's downloads draw a tqdm bar per file in the server's log (``config.json: 1.81kB [00:00,
5.73MB/s]``, ``model-00001-of-00002.safetensors: 100%|██| 4.98G/4.98G [00:20<00:00, 243MB/s]``): a
number with a unit of bytes, which would make it look like a memory line no wording reads. A bar whose
rate is in bytes per second is such a transfer.
"""

from __future__ import annotations

import re

#: a tqdm bar's timing and its rate in bytes per second, where the line ends: ``[00:00, 5.73MB/s]``
_BYTES_BAR = re.compile(
    r"\[(?:[0-9]{1,4}:)?[0-9]{1,2}:[0-9]{2}(?:<[0-9:?]{1,16})?, *[0-9.?]{1,16} ?[kKMGTP]?i?B/s\]\s*$"
)


def transfer_bar(text: str) -> bool:
    """Whether ``text`` ends with a progress bar of bytes moved."""
    return text.endswith("B/s]") and _BYTES_BAR.search(text) is not None
