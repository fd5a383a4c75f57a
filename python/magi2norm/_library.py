"""The extension's calls on torch tensors: each tensor described by integers, and one library
norm kept per weight so that a call does not remake the scale (float32(W(w + 1)))."""
from __future__ import annotations

import collections
import math
import weakref

import torch

from . import _extension

Error = _extension.Error

# The library's dtypes, by the extension's codes (magi2norm::DType's order).
DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}

# DLPack's (type code, bits) of each: kDLFloat = 2, kDLBfloat = 4.
_DLPACK_TYPES = {torch.float32: (2, 32), torch.bfloat16: (4, 16), torch.float16: (2, 16)}
# CPU outputs from this size on come from the extension's pool (output_pool.hpp), whose blocks
# are reused warm; smaller ones from torch, whose allocator reuses them without faults anyway.
_POOL_MIN_BYTES = 1 << 20

_GROUPING_NONE, _GROUPING_SIZES, _GROUPING_IDS = 0, 1, 2
# Norms kept at once: a model's distinct norm weights, with room for several models.
_MAX_NORMS = 256
_norms: collections.OrderedDict = collections.OrderedDict()


def cuda_available() -> bool:
    return _extension.cuda_available()


def last_variant() -> str:
    """The library variant the calling thread's last call ran, e.g.
    "magi2_norm_cpu_paired_streaming_bf16_bf16" (magi2norm.hpp, last_variant)."""
    return _extension.last_variant()


def empty(shape, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A new contiguous output: pooled on the CPU when large, else torch's."""
    if device.type == "cpu" and math.prod(shape) * dtype.itemsize >= _POOL_MIN_BYTES:
        return torch.from_dlpack(_extension.pooled_tensor(list(shape), *_DLPACK_TYPES[dtype]))
    return torch.empty(shape, dtype=dtype, device=device)


def release_pool() -> int:
    """Frees the CPU output blocks the pool keeps for reuse; returns their bytes."""
    return _extension.release_pool()


def pooled_bytes() -> int:
    return _extension.pooled_bytes()


def _describe(t: torch.Tensor) -> tuple:
    return t.data_ptr(), DTYPE_CODES[t.dtype], tuple(t.shape), t.stride()


def _norm(weight: torch.Tensor, dim: int, eps: float, num_modality: int, num_patterns: int):
    """The library norm of this weight's current values: kept while the same tensor holds the
    same version (an optimizer step or a load_state_dict bumps it), else made anew from a host
    copy of the weight."""
    key = (id(weight), weight.data_ptr(), weight._version, dim, eps, num_modality, num_patterns)
    entry = _norms.get(key)
    if entry is not None and entry[0]() is weight:
        _norms.move_to_end(key)
        return entry[1]
    host = weight.detach().cpu()
    norm = _extension.Norm(dim, eps, num_modality, num_patterns, host.data_ptr(), DTYPE_CODES[host.dtype],
                           tuple(host.shape), host.stride())
    _norms[key] = (weakref.ref(weight), norm)
    while len(_norms) > _MAX_NORMS:
        _norms.popitem(last=False)
    return norm


def _grouping(x: torch.Tensor, group_sizes, modality_ids) -> tuple:
    """(kind, pointer, count, tensor) of a grouping: the tensor holds the converted values for
    the call's duration."""
    if modality_ids is not None:
        if modality_ids.dim() != 1:
            raise ValueError(f"modality_ids must be one-dimensional, got shape {tuple(modality_ids.shape)}")
        ids = modality_ids.to(device=x.device, dtype=torch.int32).contiguous()
        return _GROUPING_IDS, ids.data_ptr(), ids.numel(), ids
    if group_sizes is not None:
        if group_sizes.dim() != 1:
            raise ValueError(f"group_sizes must be one-dimensional, got shape {tuple(group_sizes.shape)}")
        sizes = group_sizes.to(device="cpu", dtype=torch.int64).contiguous()
        return _GROUPING_SIZES, sizes.data_ptr(), sizes.numel(), sizes
    return _NO_GROUPING


_NO_GROUPING = (_GROUPING_NONE, 0, 0, None)


def _run(call, x, views):
    """`call` (a Norm's forward or backward) on the described views, on x's device: CUDA on the
    current stream of x's device, with that device current."""
    if x.device.type == "cuda":
        with torch.cuda.device(x.device):
            call(*views, True, torch.cuda.current_stream(x.device).cuda_stream)
    else:
        call(*views, False, 0)


_NO_TENSOR = (0, (), ())


def _describe_float32(t) -> tuple:
    """An FP32 tensor's (pointer, shape, strides), or none's."""
    return _NO_TENSOR if t is None else (t.data_ptr(), tuple(t.shape), t.stride())


def forward(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out, inverse_rms=None):
    """out = the norm of x; with `inverse_rms` (FP32, out's shape without its last axis) also each
    output row's inverse RMS, the one its values were scaled by."""
    kind, pointer, count, _held = _grouping(x, group_sizes, modality_ids)
    norm = _norm(weight, dim, eps, num_modality, num_patterns)
    _run(norm.forward, x, (*_describe(x), *_describe(out), *_describe_float32(inverse_rms), kind, pointer, count))


def backward(dy, x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, dx, dweight, inverse_rms=None):
    """dx and dweight from dy; with the forward's `inverse_rms` the rows' squares are not summed again."""
    kind, pointer, count, _held = _grouping(x, group_sizes, modality_ids)
    norm = _norm(weight, dim, eps, num_modality, num_patterns)
    _run(norm.backward, x, (*_describe(x), *_describe(dy), *_describe_float32(inverse_rms), *_describe(dx),
                            *_describe(dweight), kind, pointer, count))
