"""The module's forward against the upstream formula (upstream.py): gates 1-3 over dtype pairs x
(M, P, T) x seeds, groupings, strided and expanded inputs, special values."""
import pytest
import torch

import magi2norm
from gates import assert_bits_equal, assert_close, assert_forward_kernel_ran, assert_within_one_ulp
from upstream import UpstreamDispatcher, UpstreamNorm

DTYPE_PAIRS = [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16), (torch.bfloat16, torch.float32),
               (torch.float16, torch.float16)]
CASES = [(1, 1, 7), (3, 1, 7), (3, 4, 7), (3, 4, 0)]  # (M, P, T)
DIM = 96


def make_norms(dim, m, p, seed, out_dtype=None, weight_dtype=torch.float32):
    ours = magi2norm.MultiModalityRMSNorm(dim, num_modality=m, num_patterns=p, out_dtype=out_dtype)
    theirs = UpstreamNorm(dim, num_modality=m, num_patterns=p, out_dtype=out_dtype)
    g = torch.Generator().manual_seed(seed + 1000)
    with torch.no_grad():
        ours.weight.copy_(torch.randn(m * p * dim, generator=g) * 0.5)
    theirs.load_state_dict(ours.state_dict())
    return ours.to(weight_dtype), theirs.to(weight_dtype)


def sorted_mapping(t, m, seed):
    """Per-token modalities with the middle modality empty when m > 2, in modality order."""
    g = torch.Generator().manual_seed(seed)
    choices = torch.tensor([0, m - 1]) if m > 2 else torch.arange(m)
    return torch.sort(choices[torch.randint(0, len(choices), (t,), generator=g)]).values.to(torch.int32)


def inputs(t, p, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    shape = (t, p, DIM) if p > 1 else (t, DIM)
    return (torch.randn(shape, generator=g) * 3).to(dtype)


def check(ours, theirs, x, out_dtype, ours_kwargs=None, theirs_args=()):
    """Gate 1 on the FP32 result, gates 2 and 3 on a low-precision output, each from the kernel of
    its dtype pair; inputs unchanged."""
    x_before, w_before = x.clone(), ours.weight.detach().clone()
    with torch.no_grad():
        y = ours(x, **(ours_kwargs or {}))
        if x.numel():
            assert_forward_kernel_ran(x.dtype, out_dtype or x.dtype)
        ours.out_dtype = torch.float32
        y32 = ours(x, **(ours_kwargs or {}))
        if x.numel():
            assert_forward_kernel_ran(x.dtype, torch.float32)
        ours.out_dtype = out_dtype
        theirs.out_dtype = torch.float32
        ref32 = theirs(x, *theirs_args)
        theirs.out_dtype = out_dtype
        ref = theirs(x, *theirs_args)
    assert y.dtype == ref.dtype and y.shape == ref.shape
    assert_close(y32, ref32, 1e-6, 1e-6, "gate 1")
    if y.dtype != torch.float32:
        assert_bits_equal(y, y32.to(y.dtype), "gate 2")
        assert_within_one_ulp(y, ref, "gate 3")
    assert_bits_equal(x, x_before, "input unchanged")
    assert_bits_equal(ours.weight.detach(), w_before, "weight unchanged")


@pytest.mark.parametrize("in_dtype,out_dtype", DTYPE_PAIRS)
@pytest.mark.parametrize("m,p,t", CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gates(in_dtype, out_dtype, m, p, t, seed):
    ours, theirs = make_norms(DIM, m, p, seed, out_dtype)
    x = inputs(t, p, in_dtype, seed)
    if m == 1:
        check(ours, theirs, x, out_dtype)
        return
    mapping = sorted_mapping(t, m, seed)
    dispatcher = UpstreamDispatcher(mapping, m)
    check(ours, theirs, x, out_dtype, ours_kwargs={"modality_dispatcher": dispatcher}, theirs_args=(dispatcher,))
    # Our own dispatcher, and per-token ids in a shuffled token order, give the same.
    check(ours, theirs, x, out_dtype, ours_kwargs={"modality_dispatcher": magi2norm.ModalityDispatcher(mapping, m)},
          theirs_args=(dispatcher,))
    order = torch.randperm(t, generator=torch.Generator().manual_seed(seed))
    shuffled = x[order]
    with torch.no_grad():
        y = ours(shuffled, modality_ids=mapping[order])
        if t:
            assert_forward_kernel_ran(x.dtype, out_dtype)
        ref = theirs(x, dispatcher)[order]
    if out_dtype == torch.float32:
        assert_close(y, ref, 1e-6, 1e-6, "ids")
    else:
        assert_within_one_ulp(y, ref, "ids")


@pytest.mark.parametrize("p", [1, 4])
def test_singleton_head_broadcasting(p):
    ours, theirs = make_norms(DIM, 3, p, 5, torch.bfloat16)
    x = torch.randn(6, 1, DIM).to(torch.bfloat16)
    dispatcher = UpstreamDispatcher(torch.tensor([0, 0, 1, 1, 2, 2], dtype=torch.int32), 3)
    check(ours, theirs, x, torch.bfloat16, ours_kwargs={"modality_dispatcher": dispatcher}, theirs_args=(dispatcher,))


@pytest.mark.parametrize("weight_dtype", [torch.bfloat16, torch.float16])
def test_low_precision_weight_rounds_its_plus_one(weight_dtype):
    ours, theirs = make_norms(DIM, 1, 1, 3, weight_dtype=weight_dtype)
    x = inputs(5, 1, torch.float32, 3)
    check(ours, theirs, x, None)


@pytest.mark.parametrize("layout", ["strided", "transposed", "expanded", "negative"])
def test_views_without_copies(layout):
    ours, theirs = make_norms(DIM, 1, 1, 4, torch.bfloat16)
    base = torch.randn(16, 2 * DIM).to(torch.bfloat16)
    x = {"strided": base[:, ::2],
         "transposed": base[:, :DIM].t().contiguous().t(),
         "expanded": base[:1, :DIM].expand(9, DIM),
         "negative": base[:, :DIM].flip(0)}[layout]
    check(ours, theirs, x, torch.bfloat16)


def test_special_values():
    ours, theirs = make_norms(DIM, 1, 1, 6, torch.float16)
    x = torch.randn(5, DIM)
    x[0] = 0
    x[1, 3] = float("nan")
    x[2, 7] = float("inf")
    x[3, 1] = 1e30  # its square overflows FP32
    check(ours, theirs, x, torch.float16)
    with torch.no_grad():
        y = ours(x).float()
    assert bool((y[0] == 0).all()) and bool(torch.isnan(y[1]).all())
    assert bool(torch.isnan(y[2, 7])) and bool((y[2, torch.arange(DIM) != 7] == 0).all())


def test_multimodal_without_grouping_is_refused():
    ours = magi2norm.MultiModalityRMSNorm(DIM, num_modality=3)
    with pytest.raises(ValueError, match="modality_dispatcher is required for multimodal RMSNorm"):
        ours(torch.randn(3, DIM))


def test_bad_grouping_names_the_problem():
    ours = magi2norm.MultiModalityRMSNorm(DIM, num_modality=2)
    with pytest.raises(magi2norm.Error, match="grouping"):
        ours(torch.randn(4, DIM), UpstreamDispatcher(torch.tensor([0, 1, 1], dtype=torch.int32), 2))
    with pytest.raises(magi2norm.Error, match="modality_id"):
        ours(torch.randn(3, DIM), modality_ids=torch.tensor([0, 5, 1], dtype=torch.int32))
