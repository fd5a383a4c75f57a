"""Called from torch, the ops run on torch's intra-op threads: they start no thread of a pool of
their own, torch.set_num_threads governs them, and the bits do not depend on the count. Each case
runs in a fresh process, whose threads it counts (/proc/self/task)."""
import subprocess
import sys

import pytest

from gates import assert_bits_equal

PROGRAM = """
import os, sys, torch, magi2norm
threads = int(sys.argv[1])
torch.set_num_threads(threads)
count = lambda: len(os.listdir("/proc/self/task"))
x = torch.randn(2048, 1536, generator=torch.Generator().manual_seed(0))
before = count()
torch.add(x, 1)                  # torch's own pool, started by a torch op
after_torch = count()
norm = magi2norm.MultiModalityRMSNorm(1536, out_dtype=torch.bfloat16)
x.requires_grad_(True)
for _ in range(3):
    y = norm(x)
    y.float().sum().backward()
print(before, after_torch, count(), magi2norm.last_variant())
torch.save((y.detach(), x.grad, norm.weight.grad), sys.argv[2])
"""


def run(threads, path):
    out = subprocess.run([sys.executable, "-c", PROGRAM, str(threads), str(path)], check=True, capture_output=True,
                         text=True).stdout.split()
    return int(out[0]), int(out[1]), int(out[2]), out[3]


@pytest.mark.parametrize("threads", [1, 2])
def test_no_pool_beside_torch(threads, tmp_path):
    before, after_torch, after_norm, variant = run(threads, tmp_path / "r.pt")
    assert variant.startswith("magi2_norm_backward_")  # the kernels ran, forward and backward
    assert after_norm == after_torch, f"the norm started {after_norm - after_torch} threads beside torch's"
    if threads == 1:
        assert after_norm == before  # one thread: torch starts none, nor does the norm


def test_same_bits_for_any_thread_count(tmp_path):
    import torch
    run(1, tmp_path / "one.pt")
    run(2, tmp_path / "two.pt")
    for a, b, what in zip(torch.load(tmp_path / "one.pt"), torch.load(tmp_path / "two.pt"), ("y", "dx", "dweight")):
        assert_bits_equal(a, b, what)
