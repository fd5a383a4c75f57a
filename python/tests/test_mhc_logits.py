"""magi2norm.mhc_logits and torch.ops.magi2norm.mhc_logits: the fused op against a float64
oracle (SPEC.md's L1) and the plain formula with upstream's module, the module or a
functools.partial of it with a dispatcher or ids as vLLM-Omni passes it, [T, S*C] and [T, S, C],
the formula where gradients are wanted, opcheck and torch.compile, and bad input."""
import functools

import pytest
import torch

import magi2norm
from upstream import UpstreamDispatcher, UpstreamMHCHandler, UpstreamNorm

S, C, N = 4, 96, 24
D = S * C
NAMES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}


def setup(num_modality, dtype=torch.bfloat16, tokens=11, seed=0):
    g = torch.Generator().manual_seed(seed)
    module = magi2norm.MultiModalityRMSNorm(D, num_modality=num_modality, out_dtype=torch.float32)
    upstream = UpstreamNorm(D, num_modality=num_modality, out_dtype=torch.float32)
    with torch.no_grad():
        module.weight.copy_(torch.randn(num_modality * D, generator=g) * 0.1)
        upstream.weight.copy_(module.weight)
    x = (torch.randn(tokens, D, generator=g) * 3).to(dtype)
    phi = torch.randn(D, N, generator=g) * 0.05
    mapping = torch.randint(0, num_modality, (tokens,), generator=g, dtype=torch.int32)
    return module, upstream, x, phi, mapping


def assert_l1(logits, y64, phi):
    """|logits - y64 @ phi| <= 2^-20 sum |y64 phi| + 2^-40 sum |phi| (SPEC.md's L1)."""
    phi64 = phi.double()
    reference = y64 @ phi64
    bound = (y64.abs() @ phi64.abs()) * 2.0 ** -20 + phi64.abs().sum(0) * 2.0 ** -40
    error = (logits.double() - reference).abs()
    assert bool((error <= bound).all()), f"max error / bound {float((error / bound).max()):.3g}"


def oracle_rows(module, x, modality):
    """The norm's lines in float64 with the scale float32(w + 1)."""
    x64 = x.double()
    inv = 1 / torch.sqrt((x64 * x64).mean(-1, keepdim=True) + module.eps)
    scale = (module.weight.detach() + 1).view(module.num_modality, D)[modality.long()].double()
    return x64 * inv * scale


@pytest.mark.parametrize("num_modality", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_fused_within_l1_of_float64_and_of_upstreams_formula(num_modality, dtype):
    module, upstream, x, phi, mapping = setup(num_modality, dtype)
    dispatcher = UpstreamDispatcher(mapping, num_modality)
    xd = dispatcher.permute(x)  # tokens in modality order, as the model dispatches them
    norm = functools.partial(module, modality_dispatcher=dispatcher) if num_modality > 1 else module
    with torch.no_grad():
        logits = magi2norm.mhc_logits(xd, norm, phi)
        assert magi2norm.last_variant() == f"magi2_norm_cpu_mhc_logits_{NAMES[dtype]}"
        formula = upstream(xd, dispatcher).float() @ phi
    assert logits.shape == (x.shape[0], N) and logits.dtype == torch.float32
    modality = dispatcher.permute(mapping) if num_modality > 1 else torch.zeros(x.shape[0], dtype=torch.int32)
    assert_l1(logits, oracle_rows(module, xd, modality), phi)
    torch.testing.assert_close(logits, formula, rtol=1e-4, atol=1e-5)


def test_ids_streams_and_partials_give_the_same_bits():
    module, _, x, phi, mapping = setup(3)
    dispatcher = UpstreamDispatcher(mapping, 3)
    xd, md = dispatcher.permute(x), dispatcher.permute(mapping)
    with torch.no_grad():
        by_sizes = magi2norm.mhc_logits(xd, functools.partial(module, modality_dispatcher=dispatcher), phi)
        by_ids = magi2norm.mhc_logits(xd, functools.partial(module, modality_ids=md), phi)
        positional = magi2norm.mhc_logits(xd, functools.partial(module, dispatcher), phi)
        streams = magi2norm.mhc_logits(xd.view(-1, S, C), functools.partial(module, modality_dispatcher=dispatcher), phi)
    for other in (by_ids, positional, streams):
        assert torch.equal(by_sizes, other)


@pytest.mark.parametrize("num_modality", [1, 3])
def test_gradients_through_the_backward_op_as_the_formulas(num_modality):
    """Autograd of the fused call (magi2norm::mhc_logits_backward) against upstream's formula's:
    x's, the weight's and phi's gradients; the last variant the backward op's."""
    module, upstream, x, phi, mapping = setup(num_modality, torch.float32)
    dispatcher = UpstreamDispatcher(mapping, num_modality)
    xd = dispatcher.permute(x) if num_modality > 1 else x
    norm = functools.partial(module, modality_dispatcher=dispatcher) if num_modality > 1 else module
    dlogits = torch.randn(x.shape[0], N, generator=torch.Generator().manual_seed(2))
    grads = []
    for fn, weight in ((lambda a, p: magi2norm.mhc_logits(a, norm, p), module.weight),
                       (lambda a, p: upstream(a, dispatcher if num_modality > 1 else None).float() @ p, upstream.weight)):
        a, p = xd.clone().requires_grad_(True), phi.clone().requires_grad_(True)
        weight.grad = None
        fn(a, p).backward(dlogits)
        grads.append((a.grad, weight.grad, p.grad))
    assert magi2norm.last_variant().startswith("magi2_norm_backward_cpu")
    for ours, theirs, what in zip(grads[0], grads[1], ("dx", "dweight", "dphi")):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5, msg=what)


def test_the_formula_where_the_norm_is_another():
    module, upstream, x, phi, mapping = setup(1, torch.float32)
    with torch.no_grad():
        assert torch.allclose(magi2norm.mhc_logits(x, upstream, phi), upstream(x).float() @ phi)


def test_opcheck_and_compile():
    module, _, x, phi, mapping = setup(3)
    sizes = torch.bincount(mapping.long(), minlength=3).to(torch.int32)
    w = module.weight.detach()
    torch.library.opcheck(torch.ops.magi2norm.mhc_logits.default, (x, w, phi, sizes, None, D, 1e-6, 3))
    torch.library.opcheck(torch.ops.magi2norm.mhc_logits.default, (x.view(-1, S, C), w, phi, None, mapping, D, 1e-6, 3))
    torch.library.opcheck(torch.ops.magi2norm.mhc_logits.default,
                          (x.float().requires_grad_(True), w.clone().requires_grad_(True), phi.clone().requires_grad_(True),
                           sizes, None, D, 1e-6, 3))
    _, inv = torch.ops.magi2norm.mhc_logits(x, w, phi, sizes, None, D, 1e-6, 3)
    torch.library.opcheck(torch.ops.magi2norm.mhc_logits_backward.default,
                          (torch.randn(x.shape[0], N), x, w, phi, inv, sizes, None, D, 1e-6, 3))
    logits, inverse_rms = torch.ops.magi2norm.mhc_logits(x, w, phi, sizes, None, D, 1e-6, 3)
    _, forward_inverse_rms = torch.ops.magi2norm.forward(x, w, sizes, None, D, 1e-6, 3, 1, 0)
    assert torch.equal(inverse_rms, forward_inverse_rms)
    compiled = torch.compile(lambda a, b: torch.ops.magi2norm.mhc_logits(a, w, b, sizes, None, D, 1e-6, 3)[0], fullgraph=True)
    assert torch.equal(compiled(x, phi), logits)


def test_bad_input_raises_the_librarys_error():
    module, _, x, phi, _ = setup(1)
    w = module.weight.detach()
    with pytest.raises(RuntimeError, match=r"magi2norm.Error: shape: .*mhc_logits: phi must be \[D, N\]"):
        torch.ops.magi2norm.mhc_logits(x, w, phi[:-1], None, None, D, 1e-6, 1)
    with pytest.raises(RuntimeError, match=r"magi2norm.Error: dtype: .*mhc_logits: phi must be f32"):
        torch.ops.magi2norm.mhc_logits(x, w, phi.bfloat16(), None, None, D, 1e-6, 1)
    with pytest.raises(RuntimeError, match=r"magi2norm.Error: shape: .*mhc_logits: x"):
        torch.ops.magi2norm.mhc_logits(x[:, :-1], w, phi, None, None, D, 1e-6, 1)


def test_install_gives_the_models_handlers_the_fused_logits():
    """A layer holding upstream's handler and this package's mHC norm: after install_mhc_logits its
    compute_logits runs the op and returns upstream's split and shapes, within L1 of float64."""
    module, _, x, _, mapping = setup(3)
    phi = torch.randn(D, S + S + S * S, generator=torch.Generator().manual_seed(3)) * 0.05
    layer = torch.nn.Module()
    layer.norm = module
    layer.mhc = UpstreamMHCHandler(S, C)
    dispatcher = UpstreamDispatcher(mapping, 3)
    xd = dispatcher.permute(x)
    norm = functools.partial(module, modality_dispatcher=dispatcher)
    with torch.no_grad():
        expected = layer.mhc.compute_logits(xd, norm, phi)
        assert magi2norm.install_mhc_logits(layer) == 1
        got = layer.mhc.compute_logits(xd, norm, phi)
        assert magi2norm.last_variant() == "magi2_norm_cpu_mhc_logits_bf16"
    assert [t.shape for t in got] == [(x.shape[0], S), (x.shape[0], S), (x.shape[0], S, S)]
    logits = torch.cat([got[0], got[1], got[2].flatten(1)], dim=1)
    assert_l1(logits, oracle_rows(module, xd, dispatcher.permute(mapping)), phi)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="invalid flattened mHC shape"):
        layer.mhc.compute_logits(xd[:, :-1], norm, phi)
