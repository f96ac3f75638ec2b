"""NVML's word on device memory: what the driver says this process and its device hold, at one moment.

``nvidia-ml-py`` (the ``nvml`` extra) is imported when a sampler is opened, never before: without it,
without a driver, or with NVML failing to initialise, ``open_sampler`` says why and returns None, and
nothing else changes. A sample asks two things of one device: ``nvmlDeviceGetComputeRunningProcesses``
(the v3 call where the driver has it, as nvidia-ml-py picks) for this process's used memory, and
``nvmlDeviceGetMemoryInfo`` for the device's free and total.

Which device: the one NVML lists this process on. A server configures its logging before it creates
its CUDA context, so the process may not be listed yet: every device is asked until it is (then that
one alone). Where NVML never lists it (a container whose process ids NVML does not see), the device is
still known when only one can be meant (one device, or ``CUDA_VISIBLE_DEVICES`` naming one), and its
samples carry no process figure; with several, nothing is sampled rather than the wrong device.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from kvlog.nvml.errors import SamplingError


@dataclass(frozen=True)
class DeviceSample:
    """One reading of NVML: this process's device memory, and its device's."""

    #: NVML's index of the device (DCGM exporter's ``gpu`` label)
    gpu: int
    uuid: str | None
    #: what NVML attributes to this process; None when it does not list the process
    process_used_bytes: int | None
    device_free_bytes: int
    device_total_bytes: int
    #: when it was taken (``time.time()``)
    at: float

    @property
    def device_used_bytes(self) -> int:
        """Memory in use on the device by every process."""
        return self.device_total_bytes - self.device_free_bytes


class NvmlSampler:
    """Samples one process's device memory through NVML; ``device`` pins the NVML index, else it is found.

    Thread-safe (one lock): a sample is two or three NVML calls, some microseconds to a millisecond,
    which is why the live handler takes it on its worker thread and never on the server's.
    """

    def __init__(self, nvml: Any, pid: int | None = None, device: int | None = None) -> None:
        self._nvml = nvml
        self.pid = os.getpid() if pid is None else pid
        self._lock = threading.Lock()
        self._count = int(nvml.nvmlDeviceGetCount())
        self._device: int | None = None
        self._listed = False
        #: why NVML cannot list processes here, once it refused to
        self._unlisted = ""
        if device is not None:
            if not 0 <= device < self._count:
                raise SamplingError(f"NVML device {device}: NVML sees {self._count} device(s)")
            self._device = device
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(index) for index in range(self._count)]
        self._fallback = self._only_device()

    def _only_device(self) -> int | None:
        """The device meant when NVML does not list the process: the only one, or the one CUDA sees."""
        if self._count == 1:
            return 0
        visible = [name.strip() for name in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if name.strip()]
        if len(visible) != 1:
            return None
        if visible[0].isdigit():
            index = int(visible[0])
            return index if index < self._count else None
        for index, handle in enumerate(self._handles):
            if _text(self._nvml.nvmlDeviceGetUUID(handle)).startswith(visible[0]):
                return index
        return None

    def sample(self) -> DeviceSample | None:
        """The process's device memory now; None while the device cannot be told (``SamplingError`` on NVML's)."""
        with self._lock:
            try:
                return self._sample()
            except SamplingError:
                raise
            except Exception as exc:
                raise SamplingError(f"NVML failed: {type(exc).__name__}: {exc}") from exc

    def _sample(self) -> DeviceSample | None:
        nvml = self._nvml
        device, used = self._device, None
        if device is None or not self._listed:
            for index in [device] if device is not None else range(self._count):
                used = self._process_used(index)
                if used is not None or self._listed:
                    device = self._device = index
                    break
            else:
                device = self._device if self._device is not None else self._fallback
        else:
            used = self._process_used(device)
        if device is None:
            return None
        handle = self._handles[device]
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        uuid = _text(nvml.nvmlDeviceGetUUID(handle)) or None
        return DeviceSample(device, uuid, used, int(memory.free), int(memory.total), time.time())

    def _process_used(self, index: int) -> int | None:
        """The process's used memory on device ``index``, as NVML lists it (None: not listed, or not said).

        A driver that cannot list processes (some virtualised ones refuse the call) leaves the device's
        figures: the memory query that follows still fails for a driver that fails altogether.
        """
        if self._unlisted:
            return None
        try:
            processes = self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handles[index])
        except self._nvml.NVMLError as exc:
            self._unlisted = f"{type(exc).__name__}: {exc}"
            return None
        for process in processes:
            if int(process.pid) == self.pid:
                self._listed = True
                used = process.usedGpuMemory
                return int(used) if isinstance(used, int) and used >= 0 else None
        return None

    def close(self) -> None:
        """Let NVML go (``nvmlShutdown`` balances the ``nvmlInit`` of ``open_sampler``)."""
        with self._lock, contextlib.suppress(Exception):  # nothing to give back if NVML is already gone
            self._nvml.nvmlShutdown()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def open_sampler(pid: int | None = None, device: int | None = None) -> tuple[NvmlSampler | None, str]:
    """A sampler, or None and why not (nvidia-ml-py missing, no driver, NVML failing to initialise).

    Never raises: a server must run on unchanged without NVML.
    """
    try:
        import pynvml  # noqa: PLC0415 - the nvml extra, only when sampling is asked for
    except ImportError as exc:
        return None, f"nvidia-ml-py is not installed (the nvml extra): {exc}"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML cannot start: {type(exc).__name__}: {exc}"
    try:
        return NvmlSampler(pynvml, pid, device), ""
    except Exception as exc:  # noqa: BLE001 - a device NVML cannot open
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
        return None, f"NVML cannot sample: {type(exc).__name__}: {exc}"
