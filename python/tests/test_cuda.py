"""CUDA tensors (skipped without a GPU; scripts/gpu_check.sh runs them where one is lent): CUDA
against the upstream formula within the contract and against the CPU bit for bit, the ops' inverse RMS, a side stream, CUDA graph capture and
replay, module.to("cuda"), a device other than 0."""
import pytest
import torch

import magi2norm
from gates import assert_forward_kernel_ran, assert_within_one_ulp
from upstream import UpstreamNorm

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and magi2norm.cuda_available()),
                                reason="no CUDA device, or the library's CUDA backend cannot run")
DIM = 3072


def pair(m=3, out_dtype=torch.bfloat16):
    cpu = magi2norm.MultiModalityRMSNorm(DIM, num_modality=m, out_dtype=out_dtype)
    cpu.weight.data.normal_(0, 0.3)
    gpu = magi2norm.MultiModalityRMSNorm(DIM, num_modality=m, out_dtype=out_dtype).to("cuda")
    gpu.load_state_dict(cpu.state_dict())
    return cpu, gpu


def test_cpu_and_cuda_give_the_same_bits_forward_and_backward():
    cpu, gpu = pair()
    x = torch.randn(64, DIM).to(torch.bfloat16)
    ids = torch.randint(0, 3, (64,), dtype=torch.int32)
    xa, xb = x.clone().requires_grad_(True), x.cuda().requires_grad_(True)
    ya, yb = cpu(xa, modality_ids=ids), gpu(xb, modality_ids=ids.cuda())
    assert_forward_kernel_ran(torch.bfloat16, torch.bfloat16)
    assert magi2norm.last_variant().startswith("magi2_norm_cuda"), magi2norm.last_variant()
    formula = UpstreamNorm(DIM, num_modality=3, out_dtype=torch.bfloat16)
    formula.load_state_dict(cpu.state_dict())
    order = torch.argsort(ids, stable=True)
    dispatcher = magi2norm.ModalityDispatcher(ids, 3)
    with torch.no_grad():
        expected = formula(x[order], dispatcher)[torch.argsort(order)]
    assert_within_one_ulp(yb.detach().cpu(), expected, "forward against the formula")
    # One arithmetic on every target (docs/design.md, Numerics): the CPU's bits.
    assert torch.equal(yb.detach().cpu(), ya.detach())
    dy = torch.randn(64, DIM).to(torch.bfloat16)
    ya.backward(dy)
    yb.backward(dy.cuda())
    assert torch.equal(xb.grad.cpu(), xa.grad)
    assert torch.equal(gpu.weight.grad.cpu(), cpu.weight.grad)


def test_inverse_rms_on_cuda():
    """The CUDA forward op's inverse RMS scales its FP32 output bit for bit, and the backward
    from it gives the bits of the backward from its own row sums."""
    x = torch.randn(48, DIM, device="cuda").to(torch.bfloat16)
    weight = torch.randn(3 * DIM, device="cuda") * 0.3
    sizes = torch.tensor([20, 0, 28], dtype=torch.int32)
    f32 = magi2norm._library.DTYPE_CODES[torch.float32]
    y, inverse_rms = torch.ops.magi2norm.forward(x, weight, sizes, None, DIM, 1e-6, 3, 1, f32)
    scale = (weight + 1).view(3, DIM)[torch.repeat_interleave(torch.arange(3), sizes.long()).cuda()]
    assert torch.equal(y, (x.float() * inverse_rms[:, None]) * scale)
    dy = torch.randn(48, DIM, device="cuda").to(torch.bfloat16)
    own = torch.ops.magi2norm.backward(dy, x, weight, None, sizes, None, DIM, 1e-6, 3, 1)
    saved = torch.ops.magi2norm.backward(dy, x, weight, inverse_rms, sizes, None, DIM, 1e-6, 3, 1)
    for a, b in zip(own, saved):
        assert torch.equal(a, b)


def test_side_stream_and_graph_replay():
    cpu, gpu = pair(m=1)
    x = torch.randn(32, DIM, device="cuda").to(torch.bfloat16)
    expected = cpu(x.cpu()).detach()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        y = gpu(x)
    torch.cuda.current_stream().wait_stream(side)
    assert_within_one_ulp(y.cpu(), expected, "side stream")
    static_x = x.clone()
    with torch.no_grad():
        gpu(static_x)  # warm: the norm's scale is on the device before capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = gpu(static_x)
    static_x.copy_(x * 2)
    graph.replay()
    assert_within_one_ulp(static_y.cpu(), cpu(x.cpu() * 2).detach(), "graph replay")


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="one CUDA device")
def test_second_device():
    cpu, _ = pair(m=1)
    gpu = magi2norm.MultiModalityRMSNorm(DIM, out_dtype=torch.bfloat16).to("cuda:1")
    gpu.load_state_dict(cpu.state_dict())
    x = torch.randn(16, DIM).to(torch.bfloat16)
    with torch.no_grad():
        assert_within_one_ulp(gpu(x.to("cuda:1")).cpu(), cpu(x), "cuda:1")
