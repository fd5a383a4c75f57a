"""The torch ops under the namespace magi2norm, for CPU and CUDA tensors, defined and run in C++
on torch's stable ABI (python/csrc/ops.cpp); this file gives them their fake kernels and
autograd:

- magi2norm::forward(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns,
  out_dtype) -> (y, inverse_rms): the training form; out_dtype is a dtype code (0 float32,
  1 bfloat16, 2 float16, None: x's dtype; `_library.dtype_code`);
- magi2norm::normalize(...same...) -> y, and magi2norm::normalize_out(..., out) writes y into out: y alone;
- magi2norm::backward(dy, x, weight, inverse_rms, group_sizes, modality_ids, dim, eps,
  num_modality, num_patterns) -> (dx, dweight);
- magi2norm::mhc_logits(x, weight, phi, group_sizes, modality_ids, dim, eps, num_modality) ->
  (logits, inverse_rms): the mHC norm (P = 1) fused with its product with phi [D, N] FP32, x
  [T, D] or [T, S, C], logits [T, N] FP32 (SPEC.md, "The mHC logits"), and
  magi2norm::mhc_logits_backward(dlogits, x, weight, phi, inverse_rms, group_sizes, modality_ids,
  dim, eps, num_modality) -> (dx, dweight, dphi), its autograd; CPU tensors.

inverse_rms is FP32, y's shape without its last axis: each row's 1 / sqrt(mean square + eps), the
value y was scaled by, bit for bit; the backward takes it instead of summing the rows' squares
again (None: it sums them) and gives the same bits either way. Grouping goes in as tensors (group
sizes, or per-token ids in any token order), so that new sizes never recompile a compiled graph.
Outputs are torch's (large CPU ones from the ops' pool of warm blocks); on CUDA the library runs
on the current stream of x's device. The backward op takes dy in x's dtype or FP32, and converts
another (exactly, for the 16-bit ones) to FP32.

Eager training takes `EagerNorm`, an autograd.Function over normalize and backward: an op's
autograd registered from Python dispatches through Python on every call (docs/python.md).
"""
from __future__ import annotations

import torch

from . import _library


def output_shape(shape, dim: int, num_patterns: int) -> list:
    """SPEC.md's broadcasting of the input's shape against the [P, D] scale block (NumPy's rules)."""
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


def _out_dtype(x, code):
    return x.dtype if code is None else _library.DTYPES[code]


@torch.library.register_fake("magi2norm::forward")
def _forward_fake(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out_dtype):
    shape = output_shape(x.shape, dim, num_patterns)
    return x.new_empty(shape, dtype=_out_dtype(x, out_dtype)), x.new_empty(shape[:-1], dtype=torch.float32)


@torch.library.register_fake("magi2norm::normalize")
def _normalize_fake(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out_dtype):
    return x.new_empty(output_shape(x.shape, dim, num_patterns), dtype=_out_dtype(x, out_dtype))


@torch.library.register_fake("magi2norm::normalize_out")
def _normalize_out_fake(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out):
    return None


@torch.library.register_fake("magi2norm::backward")
def _backward_fake(dy, x, weight, inverse_rms, group_sizes, modality_ids, dim, eps, num_modality, num_patterns):
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


@torch.library.register_fake("magi2norm::mhc_logits")
def _mhc_logits_fake(x, weight, phi, group_sizes, modality_ids, dim, eps, num_modality):
    return x.new_empty((x.shape[0], phi.shape[1]), dtype=torch.float32), x.new_empty((x.shape[0],), dtype=torch.float32)


@torch.library.register_fake("magi2norm::mhc_logits_backward")
def _mhc_logits_backward_fake(dlogits, x, weight, phi, inverse_rms, group_sizes, modality_ids, dim, eps, num_modality):
    return x.new_empty(x.shape), weight.new_empty(weight.shape), phi.new_empty(phi.shape, dtype=torch.float32)


def _setup_mhc_logits(ctx, inputs, output):
    x, weight, phi, group_sizes, modality_ids = inputs[:5]
    ctx.save_for_backward(x, weight, phi, output[1], group_sizes, modality_ids)
    ctx.parameters = inputs[5:8]


def _mhc_logits_gradients(ctx, dlogits, _inverse_rms_grad):
    x, weight, phi, inverse_rms, group_sizes, modality_ids = ctx.saved_tensors
    dx, dweight, dphi = torch.ops.magi2norm.mhc_logits_backward(dlogits, x, weight, phi, inverse_rms, group_sizes, modality_ids,
                                                                *ctx.parameters)
    return dx, dweight, dphi, None, None, None, None, None


# The inverse RMS output's gradient is not taken (it is not differentiable).
torch.library.register_autograd("magi2norm::mhc_logits", _mhc_logits_gradients, setup_context=_setup_mhc_logits)


_NO_GRADIENTS = (None,) * 7  # group_sizes, modality_ids and the five parameters


def _save(ctx, x, weight, inverse_rms, group_sizes, modality_ids, parameters):
    ctx.save_for_backward(x, weight, inverse_rms, group_sizes, modality_ids)
    ctx.parameters = parameters


def _gradients(ctx, dy):
    x, weight, inverse_rms, group_sizes, modality_ids = ctx.saved_tensors
    dx, dweight = torch.ops.magi2norm.backward(dy, x, weight, inverse_rms, group_sizes,
                                               modality_ids, *ctx.parameters)
    return (dx, dweight) + _NO_GRADIENTS


def _setup_forward(ctx, inputs, output):
    x, weight, group_sizes, modality_ids = inputs[:4]
    _save(ctx, x, weight, output[1], group_sizes, modality_ids, inputs[4:8])


# The inverse RMS output's gradient is not taken (it is not differentiable).
torch.library.register_autograd("magi2norm::forward", lambda ctx, dy, _inverse_rms_grad: _gradients(ctx, dy),
                                setup_context=_setup_forward)


class EagerNorm(torch.autograd.Function):
    """magi2norm::normalize and its gradient by magi2norm::backward, for eager training. It keeps
    no inverse RMS: on the CPU the forms that do not write it are faster than the training form
    by more than the backward gains from it (docs/python.md), with the same bits either way."""

    @staticmethod
    def forward(ctx, x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, out_dtype_code):
        y = torch.ops.magi2norm.normalize(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns,
                                          out_dtype_code)
        _save(ctx, x, weight, None, group_sizes, modality_ids, (dim, eps, num_modality, num_patterns))
        return y

    @staticmethod
    def backward(ctx, dy):
        return _gradients(ctx, dy)
