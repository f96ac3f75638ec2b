"""Borrowed DLPack tensors on the CPU: the same header the CUDA backend hands torch, checked without a GPU."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
import torch

from kvlog.memory.dlpack import borrowed_bytes


def resident_kib() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4


def test_the_tensor_is_the_memory_not_a_copy() -> None:
    buffer = (ctypes.c_uint8 * 4096)()
    address = ctypes.addressof(buffer)
    view = borrowed_bytes(address, 4096, torch.device("cpu"))
    assert view.data_ptr() == address and view.shape == (4096,) and view.dtype == torch.uint8
    view[10] = 7
    buffer[11] = 9
    assert buffer[10] == 7 and int(view[11]) == 9
    halves = view.view(torch.bfloat16).view(8, 256)
    halves.fill_(1.0)
    assert bytes(buffer[:2]) == b"\x80\x3f"  # bfloat16 1.0, little-endian


def test_dropping_the_tensor_frees_its_header_and_never_the_memory() -> None:
    buffer = (ctypes.c_uint8 * 64)(*range(64))
    address = ctypes.addressof(buffer)
    for _ in range(20_000):
        borrowed_bytes(address, 64, torch.device("cpu"))
    before = resident_kib()
    for _ in range(100_000):
        borrowed_bytes(address, 64, torch.device("cpu"))
    # 100k leaked headers would be over 8 MiB; allow allocator noise only.
    assert resident_kib() - before < 1024
    assert list(buffer) == list(range(64))


def test_bad_requests_are_refused() -> None:
    with pytest.raises(ValueError, match="size 0 must be at least 1"):
        borrowed_bytes(4096, 0, torch.device("cpu"))
    for size in (1 << 63, 1 << 64, -1, 1.0, True):  # the header's int64 shape would wrap around
        with pytest.raises(ValueError, match="size"):
            borrowed_bytes(4096, size, torch.device("cpu"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="address"):
        borrowed_bytes(1 << 64, 16, torch.device("cpu"))
    with pytest.raises(ValueError, match="cpu and cuda"):
        borrowed_bytes(4096, 16, torch.device("meta"))
