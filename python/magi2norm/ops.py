"""The torch.library ops under the namespace magi2norm, for CPU and CUDA tensors:

- magi2norm::forward(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns,
  out_dtype) -> y
- magi2norm::backward(dy, x, weight, group_sizes, modality_ids, dim, eps, num_modality,
  num_patterns) -> (dx, dweight)

Each has a fake kernel (shapes, dtypes and strides of the real outputs: contiguous), and the
forward's autograd is the backward op. Grouping goes in as tensors (group sizes, or per-token ids
in any token order), so that new sizes never recompile a compiled graph. Torch allocates every
output; on CUDA the library runs on the current stream of the input's device.

Eager calls take `EagerNorm`, an autograd.Function over the same kernels: a custom op's Python
dispatch with autograd cost about 40 us a call on the AMD EPYC VM (2 vCPUs), the Function about
8 (timed in loops of calls at T = 16), which a decode step's norm would feel.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from . import _library


def output_shape(shape, dim: int, num_patterns: int) -> list:
    """SPEC.md's broadcasting of the input's shape against the [P, D] scale block (NumPy's rules;
    torch.broadcast_shapes costs 12 us a call)."""
    rank = max(len(shape), 2)
    a = [1] * (rank - len(shape)) + list(shape)
    b = [1] * (rank - 2) + [num_patterns, dim]
    out = []
    for i, j in zip(a, b):
        if j == 1 or i == j:
            out.append(i)
        elif i == 1:
            out.append(j)
        else:
            raise ValueError(f"input shape {tuple(shape)} does not broadcast with the scale block ({num_patterns}, {dim})")
    return out


def _dy_for_library(dy: Tensor, x: Tensor) -> Tensor:
    """dy as the library takes it: in x's dtype or FP32 (any other widens exactly to FP32)."""
    return dy if dy.dtype in (x.dtype, torch.float32) else dy.float()


def forward_kernel(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out_dtype):
    out = _library.empty(output_shape(x.shape, dim, num_patterns), out_dtype or x.dtype, x.device)
    _library.forward(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out)
    return out


def backward_kernel(dy, x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns):
    dx = _library.empty(x.shape, x.dtype, x.device)
    dweight = torch.empty(weight.shape, dtype=weight.dtype, device=weight.device)
    _library.backward(dy, x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, dx, dweight)
    return dx, dweight


@torch.library.custom_op("magi2norm::forward", mutates_args=(), device_types=("cpu", "cuda"))
def forward(x: Tensor, weight: Tensor, group_sizes: Optional[Tensor], modality_ids: Optional[Tensor], dim: int,
            eps: float, num_modality: int, num_patterns: int, out_dtype: Optional[torch.dtype]) -> Tensor:
    return forward_kernel(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out_dtype)


@forward.register_fake
def _forward_fake(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out_dtype):
    return x.new_empty(output_shape(x.shape, dim, num_patterns), dtype=out_dtype or x.dtype)


@torch.library.custom_op("magi2norm::backward", mutates_args=(), device_types=("cpu", "cuda"))
def backward(dy: Tensor, x: Tensor, weight: Tensor, group_sizes: Optional[Tensor], modality_ids: Optional[Tensor],
             dim: int, eps: float, num_modality: int, num_patterns: int) -> tuple[Tensor, Tensor]:
    return backward_kernel(dy, x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns)


@backward.register_fake
def _backward_fake(dy, x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns):
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


_NO_GRADIENTS = (None,) * 7  # group_sizes, modality_ids and the five parameters


def _save(ctx, x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns):
    ctx.save_for_backward(x, weight, group_sizes, modality_ids)
    ctx.parameters = (dim, eps, num_modality, num_patterns)


def _gradients(ctx, dy, backward_call):
    """The forward's gradients by `backward_call`: the backward op, or its kernel when eager."""
    x, weight, group_sizes, modality_ids = ctx.saved_tensors
    dx, dweight = backward_call(_dy_for_library(dy, x), x, weight, group_sizes, modality_ids, *ctx.parameters)
    return (dx, dweight) + _NO_GRADIENTS


torch.library.register_autograd("magi2norm::forward", lambda ctx, dy: _gradients(ctx, dy, torch.ops.magi2norm.backward),
                                setup_context=lambda ctx, inputs, output: _save(ctx, *inputs[:-1]))


class EagerNorm(torch.autograd.Function):
    """magi2norm::forward and its autograd for eager calls, on the same kernels."""

    @staticmethod
    def forward(ctx, x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out_dtype):
        _save(ctx, x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns)
        return forward_kernel(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out_dtype)

    @staticmethod
    def backward(ctx, dy):
        return _gradients(ctx, dy, backward_kernel)
