"""Which device a live server process runs on, as far as its environment says for certain: DCGM exporter's labels.

DCGM exporter labels each device's series ``gpu`` (its index as the driver, NVML, numbers the host's
devices) and ``UUID`` (``GPU-…``). A process that sees one device only knows it for certain:
``CUDA_VISIBLE_DEVICES`` naming one UUID; or the container runtime's ``NVIDIA_VISIBLE_DEVICES`` naming one
device (a UUID, or an index of the host's, which is NVML's) with no ``CUDA_VISIBLE_DEVICES`` to narrow it
further; or ``CUDA_VISIBLE_DEVICES`` naming one index that CUDA numbers as NVML does
(``CUDA_DEVICE_ORDER=PCI_BUS_ID``; CUDA's default numbers the fastest device first). Anything else (several
devices visible, a MIG instance, ``all``) says nothing: a wrong label would join another device's series.
Standard library only; nothing is asked of the driver.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from kvlog.metrics.series import Device

_UUID = re.compile(r"GPU-[0-9a-fA-F-]{8,}")
_INDEX = re.compile(r"[0-9]{1,4}")


def process_device(environ: Mapping[str, str] | None = None) -> Device:
    """The device ``environ`` (default: this process's) pins the process to; ``Device()`` where it does not."""
    env = os.environ if environ is None else environ
    cuda = _one(env.get("CUDA_VISIBLE_DEVICES"))
    runtime = _one(env.get("NVIDIA_VISIBLE_DEVICES"))
    if cuda is not None:
        if _UUID.fullmatch(cuda):
            return Device(uuid=cuda)
        if (
            _INDEX.fullmatch(cuda)
            and "NVIDIA_VISIBLE_DEVICES" not in env
            and env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID"
        ):
            return Device(gpu=str(int(cuda)))
        return Device()
    if "CUDA_VISIBLE_DEVICES" in env or runtime is None:
        return Device()
    if _UUID.fullmatch(runtime):
        return Device(uuid=runtime)
    return Device(gpu=str(int(runtime))) if _INDEX.fullmatch(runtime) else Device()


def _one(value: str | None) -> str | None:
    """The one device a ``*_VISIBLE_DEVICES`` list names (CUDA stops at the first invalid entry); None otherwise."""
    if value is None:
        return None
    entries = [entry.strip() for entry in value.split(",") if entry.strip()]
    return entries[0] if len(entries) == 1 else None


__all__ = ["process_device"]
