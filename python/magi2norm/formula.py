"""SPEC.md's formula in plain PyTorch, as vLLM-Omni's MultiModalityRMSNorm computes it: the
package's path for inputs the kernels do not take (float64, a last axis other than `dim`, 0-d
tensors, dim = 0, ranks above 4), with the same values, dtype and autograd as upstream."""
from __future__ import annotations

import torch


def _scaled_groups(normalized, weight, sizes, dim, num_modality, num_patterns):
    scales = weight.view(num_modality, num_patterns, dim)
    parts = torch.split(normalized, [int(s) for s in sizes], dim=0)
    return torch.cat([part * (scales[m] + 1.0) for m, part in enumerate(parts)], dim=0)


def multi_modality_rms_norm(x, weight, dim, eps, num_modality, num_patterns, out_dtype, group_sizes=None,
                            modality_ids=None):
    normalized = x.float()
    normalized = normalized * torch.rsqrt(normalized.square().mean(dim=-1, keepdim=True) + eps)
    if num_modality == 1:
        result = normalized * (weight.view(num_patterns, dim) + 1.0)
    elif modality_ids is not None:
        # Tokens in any order: grouped by a stable sort, scaled, and put back in place.
        order = torch.argsort(modality_ids, stable=True)
        sizes = torch.bincount(modality_ids.long(), minlength=num_modality)
        grouped = _scaled_groups(normalized.index_select(0, order), weight, sizes, dim, num_modality, num_patterns)
        result = grouped.index_select(0, torch.argsort(order))
    else:
        result = _scaled_groups(normalized, weight, group_sizes, dim, num_modality, num_patterns)
    return result.to(out_dtype or x.dtype)
