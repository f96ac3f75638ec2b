"""Non-owning torch tensors over raw memory, through a DLPack capsule built with ctypes.

Why not ``__cuda_array_interface__``: torch's importer asks ``cudaPointerGetAttributes`` which device
owns the pointer, and the driver answers ``CUDA_ERROR_INVALID_VALUE`` for reserved address space that
is not mapped yet (seen on an H200, driver 580). A post-capture KV pool needs exactly such views: its
buffers span the upper bound before ``finalize`` backs them. DLPack names the device explicitly, so
torch never asks.

The capsule's ``DLManagedTensor`` lives in one ``malloc`` block together with its shape and strides,
and its deleter is libc's ``free``: when torch drops the tensor it frees the block, with no Python
callback to run (or to outlive) at interpreter shutdown. The memory itself is never freed by torch:
the arena owns it.
"""

from __future__ import annotations

import ctypes
from typing import Final

import torch

from kvlog.memory.limits import SIZE_MAX, checked_int

_KDL_CPU: Final = 1
_KDL_CUDA: Final = 2
_KDL_UINT: Final = 1
_DEVICE_TYPES: Final = {"cpu": _KDL_CPU, "cuda": _KDL_CUDA}


class _DLDevice(ctypes.Structure):
    _fields_ = (("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32))


class _DLDataType(ctypes.Structure):
    _fields_ = (("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16))


class _DLTensor(ctypes.Structure):
    _fields_ = (
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    )


class _DLManagedTensor(ctypes.Structure):
    _fields_ = (("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p))


class _Block(ctypes.Structure):
    """What one ``malloc`` holds: the managed tensor, then its one-element shape and strides."""

    _fields_ = (("managed", _DLManagedTensor), ("shape", ctypes.c_int64), ("strides", ctypes.c_int64))


_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = (ctypes.c_size_t,)
_FREE: Final = ctypes.cast(_libc.free, ctypes.c_void_p).value
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
# PyCapsule_New keeps the name pointer, so the name must outlive every capsule: a module constant.
_CAPSULE_NAME: Final = ctypes.create_string_buffer(b"dltensor")


def borrowed_bytes(address: int, nbytes: int, device: torch.device) -> torch.Tensor:
    """A one-dimensional uint8 tensor over ``nbytes`` at ``address`` on ``device``; torch will not free it.

    Both are checked first (``ValueError``): the header's fields are fixed-width C integers, which
    ctypes would fill with a wrapped-around value.
    """
    nbytes = checked_int("a borrowed tensor's size", nbytes, minimum=1, error=ValueError)
    address = checked_int("a borrowed tensor's address", address, limit=SIZE_MAX, error=ValueError)
    device_type = _DEVICE_TYPES.get(device.type)
    if device_type is None:
        raise ValueError(f"DLPack views are made for cpu and cuda devices, not {device.type}")
    block_address = _libc.malloc(ctypes.sizeof(_Block))
    if not block_address:
        raise MemoryError("malloc failed for a DLPack header")
    block = _Block.from_address(block_address)
    block.shape = nbytes
    block.strides = 1
    header = block.managed.dl_tensor
    header.data = address
    header.device = _DLDevice(device_type, device.index or 0)
    header.ndim = 1
    header.dtype = _DLDataType(_KDL_UINT, 8, 1)
    header.shape = ctypes.cast(block_address + _Block.shape.offset, ctypes.POINTER(ctypes.c_int64))
    header.strides = ctypes.cast(block_address + _Block.strides.offset, ctypes.POINTER(ctypes.c_int64))
    header.byte_offset = 0
    block.managed.manager_ctx = None
    block.managed.deleter = _FREE
    capsule = _capsule_new(block_address, ctypes.cast(_CAPSULE_NAME, ctypes.c_char_p), None)
    tensor: torch.Tensor = torch.utils.dlpack.from_dlpack(capsule)
    return tensor
