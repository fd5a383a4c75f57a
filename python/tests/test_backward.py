"""Gradients of x and of the weight: FP32 against autograd of the upstream formula (rtol = atol =
2e-5), BF16/FP16 within one ULP of a float64 evaluation of SPEC.md's backward, cast (B3)."""
import pytest
import torch

import magi2norm
from gates import assert_backward_kernel_ran, assert_close, assert_within_one_ulp
from upstream import UpstreamDispatcher, UpstreamNorm

DIM = 80


def float64_gradients(x, dy, weight, m, p, mapping, eps=1e-6):
    """SPEC.md's backward evaluated in float64 by autograd, the scale float32(W(w + 1))."""
    scale = (weight.detach() + 1).float().double().view(m, p, DIM)
    scale.requires_grad_(True)
    xd = x.detach().double().requires_grad_(True)
    n = xd * torch.rsqrt(xd.square().mean(-1, keepdim=True) + eps)
    rows = scale[mapping.long()]  # [T, P, D]
    if x.dim() == 2:
        rows = rows[:, 0]
    (n * rows).backward(dy.double())
    return xd.grad, scale.grad.reshape(-1)


@pytest.mark.parametrize("m,p,t,singleton", [(1, 1, 7, False), (3, 1, 7, False), (3, 4, 7, False), (3, 4, 6, True),
                                             (3, 4, 0, False)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fp32_against_autograd_of_the_formula(m, p, t, singleton, seed):
    g = torch.Generator().manual_seed(seed)
    ours = magi2norm.MultiModalityRMSNorm(DIM, num_modality=m, num_patterns=p)
    theirs = UpstreamNorm(DIM, num_modality=m, num_patterns=p)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(m * p * DIM, generator=g) * 0.5)
    theirs.load_state_dict(ours.state_dict())
    shape = (t, 1 if singleton else p, DIM) if p > 1 else (t, DIM)
    x = torch.randn(shape, generator=g) * 2
    dy = torch.randn((t, p, DIM) if p > 1 else (t, DIM), generator=g)
    mapping = torch.sort(torch.randint(0, m, (t,), generator=g)).values.to(torch.int32)
    mapping[mapping == 1] = 0  # modality 1 empty
    dispatcher = UpstreamDispatcher(mapping, m)
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ours(xa, dispatcher).backward(dy)
    if t:
        assert_backward_kernel_ran(torch.float32, torch.float32, torch.float32)
    theirs(xb, dispatcher).backward(dy)
    assert_close(xa.grad, xb.grad, 2e-5, 2e-5, "dx")
    assert_close(ours.weight.grad, theirs.weight.grad, 2e-5, 2e-5, "dweight")
    # Per-token ids in a shuffled order: the same gradients, in that order.
    order = torch.randperm(t, generator=g)
    xc = x[order].clone().requires_grad_(True)
    ours.weight.grad = None
    ours(xc, modality_ids=mapping[order]).backward(dy[order])
    assert_close(xc.grad, xb.grad[order], 2e-5, 2e-5, "dx by ids")
    assert_close(ours.weight.grad, theirs.weight.grad, 2e-5, 2e-5, "dweight by ids")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("out_dtype", [None, torch.float32])
@pytest.mark.parametrize("seed", [0, 1])
def test_low_precision_within_one_ulp(dtype, out_dtype, seed):
    g = torch.Generator().manual_seed(seed)
    m, p, t = 3, 1, 9
    ours = magi2norm.MultiModalityRMSNorm(DIM, num_modality=m, out_dtype=out_dtype)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(m * p * DIM, generator=g) * 0.5)
    ours.to(dtype)
    x = (torch.randn(t, DIM, generator=g) * 2).to(dtype).requires_grad_(True)
    dy = torch.randn(t, DIM, generator=g).to(out_dtype or dtype)
    ids = torch.randint(0, m, (t,), generator=g, dtype=torch.int32)
    ours(x, modality_ids=ids).backward(dy)
    assert_backward_kernel_ran(dtype, out_dtype or dtype, dtype)
    dx64, dscale64 = float64_gradients(x, dy.float(), ours.weight, m, p, ids)
    assert x.grad.dtype == dtype and ours.weight.grad.dtype == dtype
    assert_within_one_ulp(x.grad, dx64.to(dtype), "dx")
    assert_within_one_ulp(ours.weight.grad, dscale64.to(dtype), "dweight")
