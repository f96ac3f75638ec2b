"""What a measurement tells of a pool whose line only claims it is allocated: the ``measured`` rule.

Between sglang's post-capture sizing (2026-07) and its wording fix (#33598), a pool in an address-space
reservation was printed as ``KV Cache is allocated``; the line alone cannot tell. The driver can: a
reservation moves no used memory, an allocation moves at least its size. So, with the pool's stated
size ``P`` (the printed figures' sum) and their rounding ``u``:

- used memory of the process (or, where NVML does not list it, of the device, which includes the
  process) below ``P - u`` when the line is read: no allocation of that size can be held, whatever else
  happened; a ``va_upper_bound``;
- since the previous memory record of the process, used memory rose by less than half of ``P``: a
  reservation (the pool's first page and whatever else the process allocated meanwhile stay far below
  its size); rose by at least ``P - u``: allocated;
- anything between, or samples taken too long after their records (``MAX_LAG_S``), or on different
  devices: no verdict, and the claim stands as the line made it.

The limit, stated in docs/integrate.md: a sample is taken on the handler's worker, some microseconds to
milliseconds after the record; memory allocated or freed in that window counts as before the record.
A device-wide figure also counts what other processes allocate or free between the two samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kvlog.nvml.sampler import DeviceSample

#: samples taken later than this after their record say too little about the moment it was logged
MAX_LAG_S = 0.1

State = Literal["va_upper_bound", "allocated"]


@dataclass(frozen=True)
class MeasuredState:
    """The state a measurement tells, and the evidence for ``migrated.inferred``."""

    state: State
    evidence: str
    #: whose figure it rests on: the previous sample's record (the rise), or the pool's own (what is held)
    previous: bool


def _used(sample: DeviceSample, both: DeviceSample | None = None) -> tuple[int, str]:
    """The process's figure when NVML listed it (in both samples, if two), else the device's."""
    if sample.process_used_bytes is not None and (both is None or both.process_used_bytes is not None):
        return sample.process_used_bytes, "this process's used device memory"
    return sample.device_used_bytes, "device memory in use on GPU {gpu} (NVML does not list this process)"


def measured_state(
    stated: int,
    spread: int,
    now: DeviceSample,
    now_lag_s: float,
    *,
    before: DeviceSample | None = None,
    before_lag_s: float = 0.0,
) -> MeasuredState | None:
    """The pool's state by measurement, or None where the figures cannot tell it (see the module)."""
    if stated <= 0 or now_lag_s > MAX_LAG_S:
        return None
    held, whose = _used(now)
    whose = whose.format(gpu=now.gpu)
    if held < stated - spread:
        return MeasuredState(
            "va_upper_bound",
            f"NVML: {whose} is {held} bytes {now_lag_s * 1e6:.0f} us after the line, less than the pool's stated "
            f"{stated} bytes (+- {spread}): it cannot be allocated",
            previous=False,
        )
    if before is None or before.gpu != now.gpu or before_lag_s > MAX_LAG_S:
        return None
    held, whose = _used(now, before)
    held_before, _ = _used(before, now)
    whose = whose.format(gpu=now.gpu)
    rise = held - held_before
    if rise < stated // 2:
        return MeasuredState(
            "va_upper_bound",
            f"NVML: {whose} rose by {rise} bytes since the previous memory record, less than half the pool's "
            f"stated {stated} bytes: a reservation moves no used memory",
            previous=True,
        )
    if rise >= stated - spread:
        return MeasuredState(
            "allocated",
            f"NVML: {whose} rose by {rise} bytes since the previous memory record, the pool's stated "
            f"{stated} bytes (+- {spread}) or more: allocated",
            previous=True,
        )
    return None
