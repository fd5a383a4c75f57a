import os
import sys

import pytest

# gates.py and upstream.py, the tests' own helpers, import as top-level modules.
sys.path.insert(0, os.path.dirname(__file__))

import magi2norm  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "formula: the test expects the plain formula, not the kernels, for some calls")
    config.addinivalue_line("markers", "compiler: the test compiles C++ (inductor, AOTInductor, a C++ host)")


@pytest.fixture(autouse=True)
def kernels_only(request, monkeypatch):
    """A test expects the kernels unless it is marked `formula`: the package's formula path
    raises when reached, so a call that quietly fell back to it (which computes what the tests
    compare with) fails instead of passing."""
    if request.node.get_closest_marker("formula"):
        return

    def refuse(*args, **kwargs):
        raise AssertionError("the plain formula ran where the kernels should have")

    monkeypatch.setattr(magi2norm.formula, "multi_modality_rms_norm", refuse)
