"""The upstream module and dispatcher written plainly, as vLLM-Omni's MAGI-2 model has them: the
independent reference the package's tests compare against (none of the package's code)."""
import torch
from torch import nn


class UpstreamDispatcher:
    def __init__(self, modality_mapping, num_modalities):
        self.num_modalities = num_modalities
        self.permute_mapping = torch.argsort(modality_mapping, stable=True)
        self.inv_permute_mapping = torch.argsort(self.permute_mapping)
        permuted = modality_mapping.index_select(0, self.permute_mapping)
        self.group_size = torch.bincount(permuted.long(), minlength=num_modalities).to(torch.int32)
        self.group_size_cpu = [int(v) for v in self.group_size.cpu().tolist()]
        self.cu_group_sizes = torch.nn.functional.pad(torch.cumsum(self.group_size, dim=0), (1, 0))

    def dispatch(self, tensor):
        return list(torch.split(tensor, self.group_size_cpu, dim=0))

    @staticmethod
    def undispatch(*groups):
        return torch.cat(groups, dim=0)

    def permute(self, tensor):
        return tensor.index_select(0, self.permute_mapping)

    def inverse_permute(self, tensor):
        return tensor.index_select(0, self.inv_permute_mapping)


class UpstreamNorm(nn.Module):
    def __init__(self, dim, *, eps=1e-6, num_modality=1, num_patterns=1, out_dtype=None, device=None):
        super().__init__()
        self.dim, self.eps, self.num_modality, self.num_patterns, self.out_dtype = dim, eps, num_modality, num_patterns, out_dtype
        self.weight = nn.Parameter(torch.zeros(num_patterns * dim * num_modality, dtype=torch.float32, device=device))

    def forward(self, tensor, modality_dispatcher=None):
        original_dtype = tensor.dtype
        n = tensor.float()
        n = n * torch.rsqrt(n.square().mean(dim=-1, keepdim=True) + self.eps)
        if self.num_modality == 1:
            result = n * (self.weight.view(self.num_patterns, self.dim) + 1.0)
        else:
            if modality_dispatcher is None:
                raise ValueError("modality_dispatcher is required for multimodal RMSNorm")
            weights = self.weight.view(self.num_modality, self.num_patterns, self.dim)
            parts = modality_dispatcher.dispatch(n)
            result = modality_dispatcher.undispatch(*(p * (weights[i] + 1.0) for i, p in enumerate(parts)))
        return result.to(self.out_dtype or original_dtype)


class UpstreamMHCHandler:
    """vLLM-Omni's MHCHandler's logits step: norm(flattened) in the handler's dtype times phi, split
    into pre [T, S], post [T, S] and residual [T, S, S]."""

    def __init__(self, num_streams, hidden_size, dtype=torch.float32):
        self.num_streams, self.hidden_size, self.dtype = num_streams, hidden_size, dtype

    def compute_logits(self, flattened, norm, phi_fused):
        if flattened.ndim != 2 or flattened.shape[-1] != self.num_streams * self.hidden_size:
            raise ValueError("invalid flattened mHC shape")
        fused = norm(flattened).to(self.dtype) @ phi_fused
        s = self.num_streams
        pre, post, residual = torch.split(fused, (s, s, s * s), dim=-1)
        return pre, post, residual.view(-1, s, s)
