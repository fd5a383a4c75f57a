"""The ops as torch.library sees them: opcheck on non-contiguous inputs, torch.compile with a
custom backend and with inductor (forward and backward, fullgraph), weight updates seen by a
compiled module, no recompile when group sizes change."""
import pytest
import torch

import magi2norm
from gates import assert_close
from upstream import UpstreamDispatcher, UpstreamNorm

DIM = 64


def op_args(dtype, grouped):
    g = torch.Generator().manual_seed(7)
    x = (torch.randn(6, 2 * DIM, generator=g)[:, ::2]).to(dtype)  # a strided view
    weight = torch.randn(3 * DIM, generator=g)
    sizes = torch.tensor([2, 0, 4], dtype=torch.int32) if grouped else None
    ids = None if grouped else torch.tensor([2, 0, 1, 1, 0, 2], dtype=torch.int32)
    return x, weight, sizes, ids


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("grouped", [True, False])
def test_opcheck(dtype, grouped):
    x, weight, sizes, ids = op_args(dtype, grouped)
    torch.library.opcheck(torch.ops.magi2norm.forward.default, (x, weight, sizes, ids, DIM, 1e-6, 3, 1, None))
    torch.library.opcheck(torch.ops.magi2norm.forward.default,
                          (x.requires_grad_(True), weight.requires_grad_(True), sizes, ids, DIM, 1e-6, 3, 1,
                           torch.float32))
    dy = torch.randn(6, DIM).t().contiguous().t()  # a transposed layout
    torch.library.opcheck(torch.ops.magi2norm.backward.default,
                          (dy, x.detach(), weight.detach(), sizes, ids, DIM, 1e-6, 3, 1))


class Counter:
    """A torch.compile backend that counts its graphs and runs them as traced."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


def block_pair(m):
    ours = magi2norm.MultiModalityRMSNorm(DIM, num_modality=m)
    theirs = UpstreamNorm(DIM, num_modality=m)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(m * DIM) * 0.3)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compiled_forward_and_backward(backend):
    torch._dynamo.reset()
    ours, theirs = block_pair(3)
    compiled = torch.compile(ours, fullgraph=True, backend=backend)
    x = torch.randn(8, DIM)
    dispatcher = UpstreamDispatcher(torch.tensor([0, 0, 0, 1, 2, 2, 2, 2], dtype=torch.int32), 3)
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    dy = torch.randn(8, DIM)
    compiled(xa, dispatcher).backward(dy)
    theirs(xb, dispatcher).backward(dy)
    assert_close(xa.grad, xb.grad, 2e-5, 2e-5, "dx")
    assert_close(ours.weight.grad, theirs.weight.grad, 2e-5, 2e-5, "dweight")
    # An optimizer step changes the weight in place: the compiled module sees it.
    for module in (ours, theirs):
        torch.optim.SGD(module.parameters(), lr=0.5).step()
    with torch.no_grad():
        assert_close(compiled(x, dispatcher), theirs(x, dispatcher), 1e-6, 1e-6, "after a step")


def test_new_group_sizes_do_not_recompile():
    torch._dynamo.reset()
    ours, theirs = block_pair(3)
    counter = Counter()
    compiled = torch.compile(ours, fullgraph=True, backend=counter)
    x = torch.randn(8, DIM)
    for mapping in ([0, 0, 0, 1, 2, 2, 2, 2], [0, 1, 1, 1, 1, 1, 2, 2], [2] * 8):
        dispatcher = UpstreamDispatcher(torch.tensor(mapping, dtype=torch.int32), 3)
        with torch.no_grad():
            assert_close(compiled(x, dispatcher), theirs(x, dispatcher), 1e-6, 1e-6, "sizes")
        ids = torch.tensor(mapping, dtype=torch.int32).flip(0)
        with torch.no_grad():
            assert_close(compiled(x, modality_ids=ids), theirs(x.flip(0), dispatcher).flip(0), 1e-6, 1e-6, "ids")
    assert counter.graphs == 2  # one graph by sizes, one by ids


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_op_autograd_matches_the_eager_function(dtype):
    """The op's registered autograd and the module's eager path: the same kernels, the same bits."""
    x, weight, sizes, ids = op_args(dtype, grouped=True)
    dy = torch.randn(6, DIM).to(dtype)
    grads = []
    for call in (torch.ops.magi2norm.forward, magi2norm.ops.EagerNorm.apply):
        xr, wr = x.clone().requires_grad_(True), weight.clone().requires_grad_(True)
        y = call(xr, wr, sizes, ids, DIM, 1e-6, 3, 1, None)
        y.backward(dy)
        grads.append((y.detach(), xr.grad, wr.grad))
    for a, b in zip(*grads):
        assert torch.equal(a, b)
