"""magi2norm: the MAGI-2 multi-modality RMSNorm (SPEC.md) on Halide-compiled kernels, as torch
ops on torch's stable ABI (torch.ops.magi2norm.forward / .normalize / .backward) and a drop-in
module.

    import magi2norm
    norm = magi2norm.MultiModalityRMSNorm(3072, num_modality=3)   # vLLM-Omni's parameters
    y = norm(x, dispatcher)                                        # or modality_ids=ids
    logits = magi2norm.mhc_logits(flattened, functools.partial(mhc_norm, modality_dispatcher=dispatcher), phi)
    magi2norm.install_mhc_logits(model)                            # every MHCHandler.compute_logits fused
"""
from . import ops  # noqa: F401  (the ops' fake kernels and autograd)
from ._library import PATH as library_path
from ._library import Error, clear_norms, cuda_available, last_variant, pooled_bytes, release_pool
from .dispatcher import ModalityDispatcher
from .functional import kernels_apply, multi_modality_rms_norm
from .mhc import install_mhc_logits, mhc_logits
from .module import MultiModalityRMSNorm

__all__ = ["Error", "ModalityDispatcher", "MultiModalityRMSNorm", "clear_norms", "cuda_available", "install_mhc_logits",
           "kernels_apply", "last_variant", "library_path", "mhc_logits", "multi_modality_rms_norm", "pooled_bytes",
           "release_pool"]
