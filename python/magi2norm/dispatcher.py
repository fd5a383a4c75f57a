"""magi2norm.ModalityDispatcher: the model's per-step grouping helper, with vLLM-Omni's
constructor and members, so that code written for either runs with the other."""
from __future__ import annotations

import torch


class ModalityDispatcher:
    """From a 1-D modality mapping (one id a token): the stable argsort permutation, its inverse,
    the permuted mapping, the group sizes (bincount with minlength, int32), their host list and
    the cumulative sizes with a leading 0."""

    def __init__(self, modality_mapping: torch.Tensor, num_modalities: int) -> None:
        if modality_mapping.ndim != 1:
            raise ValueError("modality mapping must be a one-dimensional tensor")
        self.modality_mapping = modality_mapping
        self.num_modalities = num_modalities
        self.permute_mapping = torch.argsort(modality_mapping, stable=True)
        self.inv_permute_mapping = torch.empty_like(self.permute_mapping)
        self.inv_permute_mapping[self.permute_mapping] = torch.arange(
            self.permute_mapping.numel(), device=self.permute_mapping.device)
        self.permuted_modality_mapping = modality_mapping[self.permute_mapping]
        counts = torch.bincount(self.permuted_modality_mapping.long(), minlength=num_modalities)
        self.group_size = counts.to(torch.int32)
        self.group_size_cpu = self.group_size.cpu().tolist()
        zero = torch.zeros(1, dtype=counts.dtype, device=counts.device)
        self.cu_group_sizes = torch.cat([zero, counts.cumsum(0)])

    def dispatch(self, tensor: torch.Tensor) -> list:
        """The modality-ordered tensor's groups along axis 0."""
        return list(tensor.split(self.group_size_cpu, dim=0))

    @staticmethod
    def undispatch(*groups: torch.Tensor) -> torch.Tensor:
        return torch.cat(groups, dim=0)

    def permute(self, tensor: torch.Tensor) -> torch.Tensor:
        """Tokens into modality order along axis 0."""
        return tensor[self.permute_mapping]

    def inverse_permute(self, tensor: torch.Tensor) -> torch.Tensor:
        """Tokens back into the mapping's order along axis 0."""
        return tensor[self.inv_permute_mapping]
