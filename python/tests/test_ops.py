"""The ops as torch.library sees them: opcheck on non-contiguous inputs, torch.compile with a
custom backend and with inductor (forward and backward, fullgraph), weight updates seen by a
compiled module, no recompile when group sizes change."""
import pytest
import torch

import magi2norm
from gates import assert_close
from upstream import UpstreamDispatcher, UpstreamNorm

DIM = 64
F32, BF16 = magi2norm._library.DTYPE_CODES[torch.float32], magi2norm._library.DTYPE_CODES[torch.bfloat16]


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
                          (x.requires_grad_(True), weight.requires_grad_(True), sizes, ids, DIM, 1e-6, 3, 1, F32))
    torch.library.opcheck(torch.ops.magi2norm.normalize.default,
                          (x.detach(), weight.detach(), sizes, ids, DIM, 1e-6, 3, 1, BF16))
    out = torch.empty(6, DIM, dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.magi2norm.normalize_out.default,
                          (x.detach(), weight.detach(), sizes, ids, DIM, 1e-6, 3, 1, out))
    dy = torch.randn(6, DIM).t().contiguous().t()  # a transposed layout
    _, inverse_rms = torch.ops.magi2norm.forward(x.detach(), weight.detach(), sizes, ids, DIM, 1e-6, 3, 1, None)
    for saved in (None, inverse_rms):
        torch.library.opcheck(torch.ops.magi2norm.backward.default,
                              (dy, x.detach(), weight.detach(), saved, sizes, ids, DIM, 1e-6, 3, 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_inverse_rms_is_the_one_the_output_was_scaled_by(dtype):
    """The forward op's inverse RMS: an FP32 output is (x * inv) * scale with it, bit for bit;
    it is within FP32 rounding of the float64 formula's; the backward gives the same bits from it
    as from its own row sums."""
    x, weight, sizes, ids = op_args(dtype, grouped=True)
    y, inverse_rms = torch.ops.magi2norm.forward(x, weight, sizes, ids, DIM, 1e-6, 3, 1, F32)
    assert inverse_rms.dtype == torch.float32 and inverse_rms.shape == (6,)
    modality = torch.repeat_interleave(torch.arange(3), sizes.long())
    scale = (weight + 1).view(3, DIM)[modality]
    assert torch.equal(y, (x.float() * inverse_rms[:, None]) * scale)
    x64 = x.double()
    oracle = 1 / torch.sqrt((x64 * x64).mean(-1).float() + 1e-6)
    torch.testing.assert_close(inverse_rms, oracle, rtol=1e-6, atol=0)
    dy = torch.randn(6, DIM).to(dtype)
    own = torch.ops.magi2norm.backward(dy, x, weight, None, sizes, ids, DIM, 1e-6, 3, 1)
    saved = torch.ops.magi2norm.backward(dy, x, weight, inverse_rms, sizes, ids, DIM, 1e-6, 3, 1)
    for a, b in zip(own, saved):
        assert torch.equal(a, b)


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


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.compiler)])
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
        y = y[0] if isinstance(y, tuple) else y  # the op's (y, inverse_rms)
        y.backward(dy)
        grads.append((y.detach(), xr.grad, wr.grad))
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_library_errors_name_the_problem():
    """A call the library refuses raises magi2norm.Error led by its code, from the op itself
    (a RuntimeError naming it) and from the module."""
    x, weight, sizes, ids = op_args(torch.float32, grouped=True)
    with pytest.raises(RuntimeError, match="magi2norm.Error: weight"):
        torch.ops.magi2norm.normalize(x, weight[:-1], sizes, None, DIM, 1e-6, 3, 1, None)
    with pytest.raises(RuntimeError, match="magi2norm.Error: dtype"):
        torch.ops.magi2norm.normalize(x, weight, sizes, None, DIM, 1e-6, 3, 1, 7)
    out = torch.full((6, DIM), 5.0)
    with pytest.raises(RuntimeError, match="magi2norm.Error: grouping"):
        torch.ops.magi2norm.normalize_out(x, weight, torch.tensor([1, 1, 1]), None, DIM, 1e-6, 3, 1, out)
    assert bool((out == 5).all())  # the output untouched


def test_normalize_out_writes_the_given_output():
    x, weight, sizes, ids = op_args(torch.bfloat16, grouped=False)
    out = torch.empty(6, DIM, dtype=torch.float32)
    assert torch.ops.magi2norm.normalize_out(x, weight, None, ids, DIM, 1e-6, 3, 1, out) is None
    assert torch.equal(out, torch.ops.magi2norm.normalize(x, weight, None, ids, DIM, 1e-6, 3, 1, F32))


def test_weight_updates_are_seen():
    """The ops keep one norm per weight tensor and version: an in-place update (an optimizer
    step) is seen, and a new weight in the address of a freed one is never taken for it."""
    x, weight, sizes, _ = op_args(torch.float32, grouped=True)
    first = torch.ops.magi2norm.normalize(x, weight, sizes, None, DIM, 1e-6, 3, 1, None)
    with torch.no_grad():
        weight.mul_(2)
    second = torch.ops.magi2norm.normalize(x, weight, sizes, None, DIM, 1e-6, 3, 1, None)
    expected = torch.ops.magi2norm.normalize(x, weight.clone(), sizes, None, DIM, 1e-6, 3, 1, None)
    assert not torch.equal(first, second) and torch.equal(second, expected)
    for seed in range(4):  # fresh weights, which an allocator may place where the last one was
        w = torch.randn(3 * DIM, generator=torch.Generator().manual_seed(seed))
        y = torch.ops.magi2norm.normalize(x, w, sizes, None, DIM, 1e-6, 3, 1, None)
        assert torch.equal(y, torch.ops.magi2norm.normalize(x, w.clone(), sizes, None, DIM, 1e-6, 3, 1, None))
        del w
    assert magi2norm.clear_norms() > 0


def test_inference_mode_weights():
    """Inference tensors have no version counter (nor do an AOTInductor package's constants): their
    norm is kept by the tensor alone, and the results are the same as outside inference mode."""
    x, weight, sizes, _ = op_args(torch.bfloat16, grouped=True)
    expected = torch.ops.magi2norm.normalize(x, weight, sizes, None, DIM, 1e-6, 3, 1, F32)
    with torch.inference_mode():
        w = weight.clone()
        for _ in range(2):
            assert torch.equal(torch.ops.magi2norm.normalize(x, w, sizes, None, DIM, 1e-6, 3, 1, F32), expected)


def test_backward_takes_dy_in_another_dtype():
    """dy in neither x's dtype nor FP32 (here FP16 for BF16 x) gives the bits of its FP32 copy."""
    x, weight, sizes, _ = op_args(torch.bfloat16, grouped=True)
    dy = torch.randn(6, DIM).to(torch.float16)
    for a, b in zip(torch.ops.magi2norm.backward(dy, x, weight, None, sizes, None, DIM, 1e-6, 3, 1),
                    torch.ops.magi2norm.backward(dy.float(), x, weight, None, sizes, None, DIM, 1e-6, 3, 1)):
        assert torch.equal(a, b)
