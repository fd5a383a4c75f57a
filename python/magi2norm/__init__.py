"""magi2norm: the MAGI-2 multi-modality RMSNorm (SPEC.md) on Halide-compiled kernels, as
torch.library ops (torch.ops.magi2norm.forward / .backward) and a drop-in module.

    import magi2norm
    norm = magi2norm.MultiModalityRMSNorm(3072, num_modality=3)   # vLLM-Omni's parameters
    y = norm(x, dispatcher)                                        # or modality_ids=ids
"""
from ._library import Error, cuda_available, last_variant, pooled_bytes, release_pool
from .dispatcher import ModalityDispatcher
from .functional import kernels_apply, multi_modality_rms_norm
from .module import MultiModalityRMSNorm

__all__ = ["Error", "ModalityDispatcher", "MultiModalityRMSNorm", "cuda_available", "kernels_apply", "last_variant",
           "multi_modality_rms_norm", "pooled_bytes", "release_pool"]
