"""Large CPU outputs come from the ops' pool (torch >= 2.11, whose stable ABI takes a block with
a deleter): each live output has its own block, a freed output's block serves the next output of
its size, and release_pool frees what is kept."""
import gc

import pytest
import torch

import magi2norm
from gates import assert_close
from upstream import UpstreamNorm

DIM = 1024
TOKENS = 512  # a 2 MiB FP32 output: pooled

pytestmark = pytest.mark.skipif(tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 11),
                                reason="torch 2.10's stable ABI has no from_blob with a deleter")


def test_live_outputs_keep_their_values_and_freed_blocks_are_reused():
    magi2norm.release_pool()
    ours, theirs = magi2norm.MultiModalityRMSNorm(DIM, out_dtype=torch.float32), UpstreamNorm(DIM)
    xs = [torch.randn(TOKENS, DIM) for _ in range(3)]
    with torch.no_grad():
        ys = [ours(x) for x in xs]
        assert len({y.data_ptr() for y in ys}) == 3
        for x, y in zip(xs, ys):
            assert_close(y, theirs(x), 1e-6, 1e-6, "live output")
        blocks = {y.data_ptr() for y in ys}
        del ys, y
        gc.collect()
        block_bytes = TOKENS * DIM * 4
        assert magi2norm.pooled_bytes() == 3 * block_bytes
        again = ours(xs[0])
        assert again.data_ptr() in blocks and magi2norm.pooled_bytes() == 2 * block_bytes
        assert_close(again, theirs(xs[0]), 1e-6, 1e-6, "reused block")
    assert magi2norm.release_pool() == 2 * block_bytes
    assert magi2norm.pooled_bytes() == 0


def test_gradients_in_pooled_blocks():
    magi2norm.release_pool()
    ours, theirs = magi2norm.MultiModalityRMSNorm(DIM), UpstreamNorm(DIM)
    x = torch.randn(TOKENS, DIM)
    dy = torch.randn(TOKENS, DIM)
    for _ in range(2):  # the second round reuses the first round's freed blocks
        xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        ours(xa).backward(dy)
        theirs(xb).backward(dy)
        assert_close(xa.grad, xb.grad, 2e-5, 2e-5, "dx")
        ours.weight.grad = theirs.weight.grad = None
