"""SPEC.md's numerical gates, NaN equal to NaN: gate 1 (|a - b| <= atol + rtol |b|), gate 2 (a
low-precision output is the FP32 result cast, bit for bit) and gate 3 (within one local ULP)."""
import torch


def assert_close(actual, expected, rtol, atol, what=""):
    a, b = actual.double(), expected.double()
    both_nan = torch.isnan(a) & torch.isnan(b)
    same = (a == b) | both_nan
    ok = same | ((a - b).abs() <= atol + rtol * b.abs())
    bad = (~ok).nonzero()
    assert bad.numel() == 0, f"{what}: {bad.shape[0]} elements off, first at {bad[0].tolist()}: {a[tuple(bad[0])]} vs {b[tuple(bad[0])]}"


def assert_bits_equal(actual, expected, what=""):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    nan = torch.isnan(actual.float()) & torch.isnan(expected.float())
    same = (actual.view(torch.int16) == expected.view(torch.int16)) | nan if actual.element_size() == 2 else \
        (actual.view(torch.int32) == expected.view(torch.int32)) | nan
    assert bool(same.all()), f"{what}: {int((~same).sum())} elements differ in their bits"


def _ordered(t):
    """Low-precision values as integers in value order (+0 and -0 both 0): adjacent
    representable values differ by one."""
    bits = t.view(torch.int16).int()
    return torch.where(bits < 0, -(bits & 0x7FFF), bits)


def assert_within_one_ulp(actual, expected, what=""):
    assert actual.dtype == expected.dtype and actual.dtype in (torch.bfloat16, torch.float16)
    nan = torch.isnan(actual.float()) & torch.isnan(expected.float())
    ok = ((_ordered(actual) - _ordered(expected)).abs() <= 1) | nan
    ok &= torch.isnan(actual.float()) == torch.isnan(expected.float())
    assert bool(ok.all()), f"{what}: {int((~ok).sum())} elements more than one ULP off"


_CODES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}


def assert_forward_kernel_ran(in_dtype, out_dtype):
    """The calling thread's last library call was a forward variant of this dtype pair."""
    import magi2norm
    variant = magi2norm.last_variant()
    assert variant.startswith("magi2_norm_") and not variant.startswith("magi2_norm_backward"), variant
    assert variant.endswith(f"_{_CODES[in_dtype]}_{_CODES[out_dtype]}"), variant


def assert_backward_kernel_ran(in_dtype, dy_dtype, dx_dtype):
    """The calling thread's last library call was a backward variant of these dtypes."""
    import magi2norm
    variant = magi2norm.last_variant()
    assert variant.startswith("magi2_norm_backward_"), variant
    assert variant.endswith(f"_{_CODES[in_dtype]}_{_CODES[dy_dtype]}_{_CODES[dx_dtype]}"), variant
