"""Which device a live server process runs on, as far as its environment says for certain: DCGM exporter's labels.

DCGM exporter labels each device's series ``gpu`` (its index as the driver, NVML, numbers the host's
devices) and ``UUID`` (``GPU-…``). A process that sees one device only knows it for certain:
``CUDA_VISIBLE_DEVICES`` naming one UUID; or the container runtime's ``NVIDIA_VISIBLE_DEVICES`` naming one
device (a UUID, or an index of the host's, which is NVML's) with no ``CUDA_VISIBLE_DEVICES`` to narrow it
further; or ``CUDA_VISIBLE_DEVICES`` naming one index that CUDA numbers as NVML does
(``CUDA_DEVICE_ORDER=PCI_BUS_ID``; CUDA's default numbers the fastest device first). Anything else (several
devices visible, a MIG instance, ``all``) names no device: a wrong label would join another device's series.

The same variables renumber the devices the process's own lines name (an arena's ``device`` is a CUDA
ordinal): ``CUDA_VISIBLE_DEVICES=2,3`` in PCI order makes ordinal 1 the host's 3 (``Device.ordinals``); a
list of UUIDs, or a container's, renumbers them beyond knowing, and such an ordinal names no device.
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
    """The device ``environ`` (default: this process's) pins the process to, and how it numbers the ones it sees."""
    env = os.environ if environ is None else environ
    cuda, runtime = _listed(env.get("CUDA_VISIBLE_DEVICES")), _listed(env.get("NVIDIA_VISIBLE_DEVICES"))
    pci = env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID"
    if cuda is not None:  # CUDA numbers the devices it lists 0, 1, ...: the host's indices only as listed, in PCI order
        indices = runtime is None and pci and all(_INDEX.fullmatch(entry) for entry in cuda)
        ordinals = tuple(str(int(entry)) for entry in cuda) if indices else ()
        if len(cuda) == 1 and _UUID.fullmatch(cuda[0]):
            return Device(uuid=cuda[0], ordinals=ordinals)
        return Device(gpu=ordinals[0] if len(ordinals) == 1 else "", ordinals=ordinals)
    if runtime is None:
        return Device()  # every device of the host, as CUDA numbers them
    if len(runtime) == 1 and _UUID.fullmatch(runtime[0]):
        return Device(uuid=runtime[0], ordinals=())
    if len(runtime) == 1 and _INDEX.fullmatch(runtime[0]):
        return Device(gpu=str(int(runtime[0])), ordinals=())  # the container runtime numbers as NVML does
    return Device(ordinals=())


def _listed(value: str | None) -> list[str] | None:
    """The devices a ``*_VISIBLE_DEVICES`` variable names; None where it is unset or names every device."""
    if value is None or value.strip().lower() == "all":
        return None
    return [entry.strip() for entry in value.split(",") if entry.strip()]


__all__ = ["process_device"]
