"""The MAGI-2 model's norms for the Python scripts, read from measure/model_norms.def (the table the
C++ benchmarks, tuner and demo include): name, x and output dtype names, whether the model also
runs it with M = 3, a token's shape; `label` names the case as every table does (name/x_output).
torch_dtype gives a dtype name's torch dtype (torch is imported only there)."""
import os
import re
from collections import namedtuple

DEF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "measure", "model_norms.def")

ModelNorm = namedtuple("ModelNorm", "label name x out grouped row")


def model_norms():
    norms = []
    for line in open(DEF):
        m = re.match(r"MAGI2NORM_MODEL_NORM\((\w+), (\w+), (\w+), (true|false), ([0-9, ]+)\)", line)
        if m:
            name, x, out, grouped, row = m.groups()
            norms.append(ModelNorm(f"{name}/{x}_{out}", name, x, out, grouped == "true", tuple(int(v) for v in row.split(","))))
    return norms


def torch_dtype(name):
    import torch
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[name]
