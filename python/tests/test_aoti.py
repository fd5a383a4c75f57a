"""A model with the module, exported (torch.export), compiled by AOTInductor into a package, and
run by aoti_load_package and by a C++ host linking torch's libraries with the ops' library loaded
(examples/aoti/run_package.cpp): the norms' outputs equal eager's bit for bit. The GEMM between
them need not be equal, so the Q/K norm is checked on the package's own projection."""
import os
import shutil
import subprocess

import pytest
import torch
from torch import nn

import magi2norm
from gates import assert_bits_equal

TOKENS, WIDTH, HEADS = 24, 256, 4
pytestmark = pytest.mark.compiler
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class PreNormProjectionQK(nn.Module):
    """The model's pre-norm and per-head Q/K norm around a projection, M = 3 by per-token ids."""

    def __init__(self):
        super().__init__()
        self.pre = magi2norm.MultiModalityRMSNorm(WIDTH, num_modality=3, out_dtype=torch.bfloat16)
        self.proj = nn.Linear(WIDTH, WIDTH, bias=False, dtype=torch.bfloat16)
        self.qk = magi2norm.MultiModalityRMSNorm(WIDTH // HEADS, num_modality=3, out_dtype=torch.float32)

    def forward(self, x, ids):
        h = self.pre(x, modality_ids=ids)
        q = self.proj(h).view(x.shape[0], HEADS, WIDTH // HEADS)
        return h, q, self.qk(q, modality_ids=ids)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch.manual_seed(3)
    model = PreNormProjectionQK().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2)
    x = torch.randn(TOKENS, WIDTH).to(torch.bfloat16)
    ids = torch.randint(0, 3, (TOKENS,), dtype=torch.int32)
    with torch.no_grad():
        program = torch.export.export(model, (x, ids))
        path = torch._inductor.aoti_compile_and_package(program, package_path=str(tmp_path_factory.mktemp("aoti") / "model.pt2"))
    return model, x, ids, path


def check(model, x, ids, h, q, y):
    with torch.no_grad():
        h_eager, _, _ = model(x, ids)
        y_eager = model.qk(q, modality_ids=ids)
    assert_bits_equal(h, h_eager, "pre-norm")
    assert_bits_equal(y, y_eager, "Q/K norm on the package's projection")


def test_graph_calls_the_ops(exported):
    model, x, ids, _ = exported
    with torch.no_grad():
        graph = str(torch.export.export(model, (x, ids)).graph)
    assert graph.count("magi2norm.normalize") == 2


def test_package_in_python(exported):
    model, x, ids, path = exported
    h, q, y = torch._inductor.aoti_load_package(path)(x, ids)
    check(model, x, ids, h, q, y)


@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler")
def test_package_in_a_cpp_host(exported, tmp_path):
    model, x, ids, path = exported
    torch_dir = os.path.dirname(torch.__file__)
    host = tmp_path / "run_package"
    subprocess.run(["c++", "-std=c++17", "-O1", os.path.join(ROOT, "examples", "aoti", "run_package.cpp"), "-o", str(host),
                    "-isystem", os.path.join(torch_dir, "include"),
                    "-isystem", os.path.join(torch_dir, "include", "torch", "csrc", "api", "include"),
                    f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
                    "-L" + os.path.join(torch_dir, "lib"), "-Wl,-rpath," + os.path.join(torch_dir, "lib"),
                    "-ltorch", "-ltorch_cpu", "-lc10", "-ldl"], check=True)
    x.view(torch.int16).numpy().tofile(tmp_path / "x.bin")
    ids.numpy().tofile(tmp_path / "ids.bin")
    subprocess.run([str(host), path, magi2norm.library_path, str(TOKENS), str(tmp_path / "x.bin"),
                    str(tmp_path / "ids.bin"), str(tmp_path / "out")], check=True,
                   env={**os.environ, "LD_LIBRARY_PATH": os.path.join(torch_dir, "lib")})  # the package's own libtorch needs

    def read(i, dtype, shape):
        return torch.frombuffer(bytearray((tmp_path / f"out{i}.bin").read_bytes()), dtype=dtype).view(shape)

    check(model, x, ids, read(0, torch.bfloat16, (TOKENS, WIDTH)),
          read(1, torch.bfloat16, (TOKENS, HEADS, WIDTH // HEADS)),
          read(2, torch.float32, (TOKENS, HEADS, WIDTH // HEADS)))
