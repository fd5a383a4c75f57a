"""magi2norm.multi_modality_rms_norm: the C++ ops where the kernels apply, the plain formula
elsewhere."""
from __future__ import annotations

from typing import Optional

import torch

from . import _library, formula, ops

_cuda_kernels: Optional[bool] = None
# The ops' overloads, resolved once: a call through torch.ops' namespaces resolves them each time.
_forward, _normalize = torch.ops.magi2norm.forward.default, torch.ops.magi2norm.normalize.default


def _device_supported(device: torch.device) -> bool:
    global _cuda_kernels
    if device.type == "cpu":
        return True
    if device.type == "cuda":
        if _cuda_kernels is None:
            _cuda_kernels = _library.cuda_available()
        return _cuda_kernels
    return False


def kernels_apply(x: torch.Tensor, weight: torch.Tensor, dim: int, num_modality: int, num_patterns: int,
                  out_dtype: Optional[torch.dtype]) -> bool:
    """Whether the library computes this call: its dtypes, ranks 1-4 whose last axis is `dim`, a
    weight of M*P*D elements, the scale rows meeting the input as SPEC.md lists (one row for all;
    P rows over P heads or one broadcast head), tokens on axis 0 when grouped."""
    kernel_dtypes = _library.KERNEL_DTYPES
    return (x.dtype in kernel_dtypes and weight.dtype in kernel_dtypes
            and (out_dtype or x.dtype) in kernel_dtypes
            and 1 <= x.dim() <= 4 and dim >= 1 and x.shape[-1] == dim
            and weight.numel() == num_modality * num_patterns * dim
            and (num_patterns == 1 or (x.dim() >= 3 and x.shape[-2] in (1, num_patterns)))
            and (num_modality == 1 or x.dim() >= 2)
            and x.device == weight.device and _device_supported(x.device))


def multi_modality_rms_norm(x: torch.Tensor, weight: torch.Tensor, dim: int, eps: float = 1e-6,
                            num_modality: int = 1, num_patterns: int = 1,
                            out_dtype: Optional[torch.dtype] = None, *, group_sizes: Optional[torch.Tensor] = None,
                            modality_ids: Optional[torch.Tensor] = None) -> torch.Tensor:
    """SPEC.md's norm of `x` with the flat, modality-major `weight` (M*P*D values). With M > 1,
    `group_sizes` (tokens ordered by modality) or `modality_ids` (one id a token, any order) says
    which modality each token of axis 0 belongs to; with M = 1 both are ignored."""
    if num_modality == 1:
        group_sizes = modality_ids = None
    elif group_sizes is None and modality_ids is None:
        raise ValueError("modality_dispatcher is required for multimodal RMSNorm")
    elif modality_ids is not None:
        group_sizes = None
    if not kernels_apply(x, weight, dim, num_modality, num_patterns, out_dtype):
        return formula.multi_modality_rms_norm(x, weight, dim, eps, num_modality, num_patterns, out_dtype,
                                               group_sizes, modality_ids)
    if x.dim() == 1:
        x = x.unsqueeze(0)  # upstream's [D] * [1, D] is [1, D]; the library keeps rank 1
    eps, code = float(eps), _library.dtype_code(out_dtype)
    try:
        if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
            if torch.compiler.is_compiling():
                # One op with its autograd, which saves the inverse RMS for the backward.
                return _forward(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, code)[0]
            return ops.EagerNorm.apply(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns,
                                       code)
        return _normalize(x, weight, group_sizes, modality_ids, dim, eps, num_modality, num_patterns, code)
    except RuntimeError as error:
        _library.raise_library_error(error)
