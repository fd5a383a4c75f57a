"""This machine as the benchmark tables name it, from lscpu: the CPU's model name, family and
model, its CPU count and L3."""
import subprocess


def machine():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    get = lambda k: fields.get(k, "?").strip()  # noqa: E731
    return f"{get('Model name')} (family {get('CPU family')} model {get('Model')}), {get('CPU(s)')} CPUs, L3 {get('L3 cache')}"
