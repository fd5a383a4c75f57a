"""The torch.library ops under the namespace magi2norm, for CPU and CUDA tensors:

- magi2norm::forward(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns,
  out_dtype) -> (y, inverse_rms)
- magi2norm::backward(dy, x, weight, inverse_rms, group_sizes, modality_ids, dim, eps,
  num_modality, num_patterns) -> (dx, dweight)

inverse_rms is FP32, y's shape without its last axis: each row's 1 / sqrt(mean square + eps), the
value y was scaled by, bit for bit; the backward takes it instead of summing the rows' squares
again (None: it sums them) and gives the same bits either way. It is not differentiable. Each op
has a fake kernel (shapes, dtypes and strides of the real outputs: contiguous), and the forward's
autograd is the backward op. Grouping goes in as tensors (group sizes, or per-token ids
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


def _rows(shape) -> list:
    """The inverse RMS's shape: an output's without its last axis."""
    return list(shape)[:-1]


def forward_kernel(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out_dtype,
                   with_inverse_rms: bool = True):
    """(y, inverse_rms), or (y, None) without the inverse RMS (the forms that do not write it)."""
    shape = output_shape(x.shape, dim, num_patterns)
    out = _library.empty(shape, out_dtype or x.dtype, x.device)
    inverse_rms = torch.empty(_rows(shape), dtype=torch.float32, device=x.device) if with_inverse_rms else None
    _library.forward(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out, inverse_rms)
    return out, inverse_rms


def backward_kernel(dy, x, weight, inverse_rms, group_sizes, modality_ids, dim, eps, num_modality, num_patterns):
    dx = _library.empty(x.shape, x.dtype, x.device)
    dweight = torch.empty(weight.shape, dtype=weight.dtype, device=weight.device)
    _library.backward(dy, x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, dx, dweight,
                      inverse_rms)
    return dx, dweight


@torch.library.custom_op("magi2norm::forward", mutates_args=(), device_types=("cpu", "cuda"))
def forward(x: Tensor, weight: Tensor, group_sizes: Optional[Tensor], modality_ids: Optional[Tensor], dim: int,
            eps: float, num_modality: int, num_patterns: int, out_dtype: Optional[torch.dtype]) -> tuple[Tensor, Tensor]:
    return forward_kernel(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out_dtype)


@forward.register_fake
def _forward_fake(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out_dtype):
    shape = output_shape(x.shape, dim, num_patterns)
    return x.new_empty(shape, dtype=out_dtype or x.dtype), x.new_empty(_rows(shape), dtype=torch.float32)


@torch.library.custom_op("magi2norm::backward", mutates_args=(), device_types=("cpu", "cuda"))
def backward(dy: Tensor, x: Tensor, weight: Tensor, inverse_rms: Optional[Tensor], group_sizes: Optional[Tensor],
             modality_ids: Optional[Tensor], dim: int, eps: float, num_modality: int,
             num_patterns: int) -> tuple[Tensor, Tensor]:
    return backward_kernel(dy, x, weight, inverse_rms, group_sizes, modality_ids, dim, eps, num_modality, num_patterns)


@backward.register_fake
def _backward_fake(dy, x, weight, inverse_rms, group_sizes, modality_ids, dim, eps, num_modality, num_patterns):
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


_NO_GRADIENTS = (None,) * 7  # group_sizes, modality_ids and the five parameters


def _save(ctx, x, weight, inverse_rms, group_sizes, modality_ids, dim, eps, num_modality, num_patterns):
    ctx.save_for_backward(x, weight, inverse_rms, group_sizes, modality_ids)
    ctx.parameters = (dim, eps, num_modality, num_patterns)


def _gradients(ctx, dy, backward_call):
    """The forward's gradients by `backward_call`: the backward op, or its kernel when eager."""
    x, weight, inverse_rms, group_sizes, modality_ids = ctx.saved_tensors
    dx, dweight = backward_call(_dy_for_library(dy, x), x, weight, inverse_rms, group_sizes, modality_ids,
                                *ctx.parameters)
    return (dx, dweight) + _NO_GRADIENTS


def _setup_context(ctx, inputs, output):
    x, weight, group_sizes, modality_ids = inputs[:4]
    _save(ctx, x, weight, output[1], group_sizes, modality_ids, *inputs[4:8])


# The inverse RMS output's gradient is not taken (it is not differentiable).
torch.library.register_autograd("magi2norm::forward",
                                lambda ctx, dy, _inverse_rms_grad: _gradients(ctx, dy, torch.ops.magi2norm.backward),
                                setup_context=_setup_context)


class EagerNorm(torch.autograd.Function):
    """y of magi2norm::forward and its autograd for eager calls, on the same kernels. It keeps no
    inverse RMS: on the CPU the forms that do not write it are faster than the training form by
    more than the backward gains from it (docs/python.md), with the same bits either way."""

    @staticmethod
    def forward(ctx, x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out_dtype):
        out, inverse_rms = forward_kernel(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns,
                                          out_dtype, with_inverse_rms=False)
        _save(ctx, x, weight, inverse_rms, group_sizes, modality_ids, dim, eps, num_modality, num_patterns)
        return out

    @staticmethod
    def backward(ctx, dy):
        return _gradients(ctx, dy, backward_kernel)
