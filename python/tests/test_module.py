"""The module as a drop-in: state dicts both ways, attributes read at each call, the inputs only
the formula takes (float64, 0-d, a last axis of 1, dim = 0, rank 5), and a swap into a block."""
import pytest
import torch
from torch import nn

import magi2norm
from gates import assert_close, assert_within_one_ulp
from upstream import UpstreamDispatcher, UpstreamNorm


def test_state_dicts_move_both_ways():
    ours = magi2norm.MultiModalityRMSNorm(48, num_modality=3, num_patterns=2, out_dtype=torch.bfloat16)
    theirs = UpstreamNorm(48, num_modality=3, num_patterns=2, out_dtype=torch.bfloat16)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    assert ours.weight.dtype == torch.float32 and ours.weight.shape == (3 * 2 * 48,) and not ours.weight.any()
    theirs.weight.data.normal_()
    ours.load_state_dict(theirs.state_dict())
    back = UpstreamNorm(48, num_modality=3, num_patterns=2, out_dtype=torch.bfloat16)
    back.load_state_dict(ours.state_dict())
    x = torch.randn(5, 2, 48)
    dispatcher = UpstreamDispatcher(torch.tensor([0, 1, 1, 2, 2], dtype=torch.int32), 3)
    with torch.no_grad():
        assert_within_one_ulp(ours(x, dispatcher), back(x, dispatcher), "state dict round trip")


def test_attributes_are_read_at_each_call():
    ours, theirs = magi2norm.MultiModalityRMSNorm(32), UpstreamNorm(32)
    x = torch.randn(3, 32)
    for module in (ours, theirs):
        module.eps = 0.5
        module.out_dtype = torch.float16
    with torch.no_grad():
        assert_within_one_ulp(ours(x), theirs(x), "eps and out_dtype assigned")


@pytest.mark.parametrize("shape,p", [((8,), 1), ((3, 1, 8), 4), ((2, 3, 4, 8), 4), ((5, 3, 8), 1)])
def test_kernel_shapes_as_upstream_broadcasts_them(shape, p):
    ours, theirs = magi2norm.MultiModalityRMSNorm(8, num_patterns=p), UpstreamNorm(8, num_patterns=p)
    ours.weight.data.normal_()
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(shape)
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ya, yb = ours(xa), theirs(xb)
    assert ya.shape == yb.shape
    assert_close(ya.detach(), yb.detach(), 1e-6, 1e-6, "y")
    dy = torch.randn(ya.shape)
    ya.backward(dy)
    yb.backward(dy)
    assert_close(xa.grad, xb.grad, 2e-5, 2e-5, "dx")
    assert_close(ours.weight.grad, theirs.weight.grad, 2e-5, 2e-5, "dweight")


@pytest.mark.formula
@pytest.mark.parametrize("case", ["float64", "scalar", "last_axis_1", "dim_0", "rank_5", "empty"])
def test_inputs_only_the_formula_takes(case):
    dim = {"dim_0": 0, "scalar": 4}.get(case, 8)
    ours, theirs = magi2norm.MultiModalityRMSNorm(dim), UpstreamNorm(dim)
    ours.weight.data.normal_()
    theirs.load_state_dict(ours.state_dict())
    x = {"float64": torch.randn(3, 8, dtype=torch.float64), "scalar": torch.tensor(2.0),
         "last_axis_1": torch.randn(3, 1), "dim_0": torch.randn(3, 0), "rank_5": torch.randn(2, 1, 2, 3, 8),
         "empty": torch.randn(0, 8)}[case]
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ya, yb = ours(xa), theirs(xb)
    assert ya.dtype == yb.dtype and ya.shape == yb.shape
    assert_close(ya.detach(), yb.detach(), 1e-6, 1e-6, case)
    if ya.numel():
        ya.sum().backward()
        yb.sum().backward()
        assert_close(xa.grad, xb.grad, 2e-5, 2e-5, case + " dx")


class Block(nn.Module):
    """An attention-free transformer block: pre-norm MLP, then a Q/K-style per-head norm."""

    def __init__(self, norm, width=96, heads=3):
        super().__init__()
        self.heads = heads
        self.pre = norm(width, num_modality=3, out_dtype=torch.bfloat16)
        self.up = nn.Linear(width, 2 * width, dtype=torch.bfloat16)
        self.down = nn.Linear(2 * width, width, dtype=torch.bfloat16)
        self.head_norm = norm(width // heads, out_dtype=torch.float32)

    def forward(self, x, dispatcher):
        h = self.down(torch.nn.functional.gelu(self.up(self.pre(x, dispatcher))))
        h = x + h
        return self.head_norm(h.view(h.shape[0], self.heads, -1))


def test_swap_into_a_block():
    torch.manual_seed(0)
    theirs = Block(UpstreamNorm)
    for p in theirs.parameters():
        p.data.normal_(0, 0.2)
    ours = Block(magi2norm.MultiModalityRMSNorm)
    ours.load_state_dict(theirs.state_dict())
    # Each norm's own call: its input, grouping and output, checked to the contract's gates
    # against upstream's module on the same input.
    calls = []
    for name in ("pre", "head_norm"):
        getattr(ours, name).register_forward_hook(
            lambda module, args, output, name=name: calls.append((name, args, output.detach())))
    x = torch.randn(10, 96).to(torch.bfloat16)
    dispatcher = UpstreamDispatcher(torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2, 2], dtype=torch.int32), 3)
    ya, yb = ours(x, dispatcher), theirs(x, dispatcher)
    assert [name for name, _, _ in calls] == ["pre", "head_norm"]
    for name, args, output in calls:
        with torch.no_grad():
            expected = getattr(theirs, name)(*(a.detach() if torch.is_tensor(a) else a for a in args))
        if output.dtype == torch.float32:
            assert_close(output, expected, 1e-6, 1e-6, name)
        else:
            assert_within_one_ulp(output, expected, name)
    # Beyond the norms, the block's BF16 projections and GELU round differently on each side's
    # one-ULP-apart activations: the block's output and gradients agree to BF16's noise.
    assert_close(ya, yb, 2e-2, 2e-2, "block output")
    ya.square().sum().backward()
    yb.square().sum().backward()
    for (name, a), (_, b) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert_close(a.grad.float(), b.grad.float(), 5e-2, 5e-2, name)
