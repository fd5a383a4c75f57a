"""The package's native library, libmagi2norm_torch.so: the torch ops magi2norm::forward,
::normalize, ::normalize_out and ::backward on torch's stable ABI (registered when it loads), and
the library's process-level queries as C functions, read here through ctypes."""
from __future__ import annotations

import ctypes
import os

import torch

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libmagi2norm_torch.so")
torch.ops.load_library(PATH)
_native = ctypes.CDLL(PATH)  # the same loaded object: torch.ops.load_library opened it first
_native.magi2norm_torch_last_variant.restype = ctypes.c_char_p
_native.magi2norm_torch_cuda_available.restype = ctypes.c_int
_native.magi2norm_torch_clear_norms.restype = ctypes.c_int64
_native.magi2norm_torch_release_pool.restype = ctypes.c_uint64
_native.magi2norm_torch_pooled_bytes.restype = ctypes.c_uint64

# The dtypes the kernels take, by the ops' out_dtype codes (magi2norm::DType's order).
DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}
KERNEL_DTYPES = frozenset(DTYPE_CODES)


def dtype_code(dtype):
    """The ops' out_dtype argument for a torch dtype or None (x's dtype)."""
    return None if dtype is None else DTYPE_CODES[dtype]


class Error(ValueError):
    """A call the library refuses, its message led by the error's code (shape, dtype, stride,
    grouping, weight, modality_id, ...)."""


_ERROR_MARK = "magi2norm.Error: "


def raise_library_error(error: RuntimeError):
    """Re-raises an op's RuntimeError that carries a library error as magi2norm.Error."""
    message = str(error)
    start = message.find(_ERROR_MARK)
    if start < 0:
        raise error
    raise Error(message[start + len(_ERROR_MARK):].split("\n")[0]) from None


def cuda_available() -> bool:
    """Whether the ops run on CUDA tensors: a CUDA torch, and the library's CUDA backend."""
    return bool(_native.magi2norm_torch_cuda_available())


def last_variant() -> str:
    """The library variant the calling thread's last call ran, e.g.
    "magi2_norm_cpu_paired_streaming_bf16_bf16" (magi2norm.hpp, last_variant)."""
    return _native.magi2norm_torch_last_variant().decode()


def clear_norms() -> int:
    """Drops the norms the ops keep per weight tensor and version (and the references to those
    weights); returns how many there were."""
    return int(_native.magi2norm_torch_clear_norms())


def release_pool() -> int:
    """Frees the CPU output blocks the ops keep for reuse (large outputs, torch >= 2.11); returns
    their bytes."""
    return int(_native.magi2norm_torch_release_pool())


def pooled_bytes() -> int:
    """Bytes of CPU output blocks kept for reuse now."""
    return int(_native.magi2norm_torch_pooled_bytes())
