"""magi2norm.MultiModalityRMSNorm: a drop-in for vLLM-Omni's module of the same name, with the
same parameter (`weight`, FP32 zeros of M*P*D, modality-major) and state dict key, on the
library's kernels."""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from .functional import multi_modality_rms_norm


class MultiModalityRMSNorm(nn.Module):
    """RMSNorm with one scale per modality and pattern (SPEC.md). The attributes dim, eps,
    num_modality, num_patterns and out_dtype are read at each call, as upstream's are."""

    def __init__(self, dim: int, *, eps: float = 1e-6, num_modality: int = 1, num_patterns: int = 1,
                 out_dtype: Optional[torch.dtype] = None, device=None) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.num_modality = num_modality
        self.num_patterns = num_patterns
        self.out_dtype = out_dtype
        self.weight = nn.Parameter(torch.zeros(num_modality * num_patterns * dim, dtype=torch.float32, device=device))

    def forward(self, tensor: torch.Tensor, modality_dispatcher=None, *,
                modality_ids: Optional[torch.Tensor] = None) -> torch.Tensor:
        """`modality_dispatcher`: vLLM-Omni's ModalityDispatcher or magi2norm's, the input in its
        dispatched (modality) order; or `modality_ids`, one id a token in any order."""
        group_sizes = None
        if self.num_modality > 1 and modality_ids is None and modality_dispatcher is not None:
            group_sizes = modality_dispatcher.group_size
        return multi_modality_rms_norm(tensor, self.weight, self.dim, self.eps, self.num_modality,
                                       self.num_patterns, self.out_dtype, group_sizes=group_sizes,
                                       modality_ids=modality_ids)

    def extra_repr(self) -> str:
        return (f"{self.dim}, eps={self.eps}, num_modality={self.num_modality}, "
                f"num_patterns={self.num_patterns}, out_dtype={self.out_dtype}")
