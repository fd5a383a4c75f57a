"""magi2norm.mhc_logits: MAGI-2's hyper-connection logits, norm(flattened).to(float32) @ phi
(vLLM-Omni's MHCHandler.compute_logits), as one fused op where the norm is this package's module
(torch.ops.magi2norm.mhc_logits and its backward op: the normalized rows never in memory,
SPEC.md "The mHC logits"), and the plain formula elsewhere."""
from __future__ import annotations

import functools

import torch

from . import _library
from .module import MultiModalityRMSNorm

_mhc_logits_op = torch.ops.magi2norm.mhc_logits.default


def _module_and_grouping(norm):
    """This package's module behind `norm` (the module, its forward, or a functools.partial of
    either with modality_dispatcher / modality_ids, as vLLM-Omni's _branch_logits passes it) and
    the call's (group_sizes, modality_ids); None for anything else."""
    dispatcher, ids = None, None
    if isinstance(norm, functools.partial):
        if len(norm.args) > 1 or set(norm.keywords) - {"modality_dispatcher", "modality_ids"}:
            return None
        dispatcher = norm.args[0] if norm.args else norm.keywords.get("modality_dispatcher")
        ids = norm.keywords.get("modality_ids")
        norm = norm.func
    module = getattr(norm, "__self__", norm)
    if not isinstance(module, MultiModalityRMSNorm) or (norm is not module and norm != module.forward):
        return None
    if module.num_modality == 1:
        return module, None, None
    if ids is not None:
        return module, None, ids
    if dispatcher is None:
        return None  # the module raises its own error on the formula's path
    return module, dispatcher.group_size, None


def _fused_applies(module, flattened: torch.Tensor, phi: torch.Tensor) -> bool:
    """The op's case: the mHC norm (one pattern) to FP32 on CPU tensors of the library's dtypes,
    rows of D = S*C, phi [D, N] FP32; where a gradient is wanted, [T, D] rows (the backward op's)."""
    wants_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (flattened, phi, module.weight))
    rows = flattened.shape[1:].numel() if flattened.dim() in (2, 3) else -1
    return ((not wants_grad or flattened.dim() == 2) and module.num_patterns == 1
            and (module.out_dtype or flattened.dtype) == torch.float32
            and flattened.dtype in _library.KERNEL_DTYPES and module.weight.dtype in _library.KERNEL_DTYPES
            and rows == module.dim and phi.dim() == 2 and phi.shape[0] == module.dim and phi.shape[1] >= 1
            and phi.dtype == torch.float32
            and flattened.device.type == "cpu" and phi.device.type == "cpu" and module.weight.device.type == "cpu")


def mhc_logits(flattened: torch.Tensor, norm, phi: torch.Tensor) -> torch.Tensor:
    """The FP32 logits [T, N] of `flattened` [T, S*C] (or [T, S, C]) normed by `norm` and
    multiplied by `phi` [S*C, N]: compute_logits' arguments, with autograd. Fused (forward and
    backward) when `norm` is this package's module (or a functools.partial of it); else
    norm(flattened)'s FP32 value @ phi."""
    found = _module_and_grouping(norm)
    if found is None or not _fused_applies(found[0], flattened, phi):
        rows = flattened.reshape(flattened.shape[0], -1) if flattened.dim() == 3 else flattened
        return norm(rows).to(torch.float32) @ phi
    module, group_sizes, modality_ids = found
    try:
        return _mhc_logits_op(flattened, module.weight, phi, group_sizes, modality_ids, module.dim, float(module.eps),
                              module.num_modality)[0]
    except RuntimeError as error:
        _library.raise_library_error(error)


def _fused_compute_logits(handler, flattened: torch.Tensor, norm, phi_fused: torch.Tensor):
    """vLLM-Omni's MHCHandler.compute_logits with the norm and its product fused where they can
    be: the same checks, split and shapes (pre [T, S], post [T, S], residual [T, S, S])."""
    streams = handler.num_streams
    if flattened.ndim != 2 or flattened.shape[-1] != streams * handler.hidden_size:
        raise ValueError("invalid flattened mHC shape")
    if handler.dtype == torch.float32:
        fused = mhc_logits(flattened, norm, phi_fused)
    else:
        fused = norm(flattened).to(handler.dtype) @ phi_fused
    pre, post, residual = torch.split(fused, (streams, streams, streams * streams), dim=-1)
    return pre, post, residual.view(-1, streams, streams)


def install_mhc_logits(model: torch.nn.Module) -> int:
    """Gives every mHC handler the model's modules hold (an attribute with compute_logits,
    num_streams and hidden_size, as vLLM-Omni's MHCHandler) the fused compute_logits; returns how
    many. Its norm calls fuse where the norm is this package's module (swap those in first)."""
    handlers = {}
    for module in model.modules():
        for value in vars(module).values():
            if all(hasattr(value, a) for a in ("compute_logits", "num_streams", "hidden_size", "dtype")):
                handlers[id(value)] = value
    for handler in handlers.values():
        handler.compute_logits = functools.partial(_fused_compute_logits, handler)
    return len(handlers)
