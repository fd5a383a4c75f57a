"""Reads the GPU variants' generated code back and fails where it could round otherwise than the CPU.

A GPU can give other bits than the CPU even from the same algorithm: ptxas fuses a bare mul.f32
and add.f32 into one fma, LLVM's PTX backend contracts them itself, approximate division and
square root (div.approx / div.full, sqrt.approx, rsqrt, .ftz) differ by ulps, and an OpenCL
compiler may fuse the operations of one C expression (Halide's programs say FP_CONTRACT ON). This
needs no GPU:

- PTX (the CUDA variants' device code): every FP32/FP64 add, sub, mul, div, sqrt and rcp carries
  .rn, and there is no fma, mad, .approx, .ftz or rsqrt;
- OpenCL C (the source inside the OpenCL variants' objects): each floating-point statement does
  at most one arithmetic operation, so C's contraction rule (within one expression) fuses
  nothing, and no fma, mad, native_ or half_ function appears.

Usage: rounding_scan.py RUNTIME_BUILD_DIR [--cuda] [--opencl]  (the backends the build has)
"""
import argparse
import pathlib
import re
import sys

PTX_FLOAT_OP = re.compile(r"^\s*(?:@%p\d+\s+)?(add|sub|mul|div|sqrt|rcp|fma|mad|rsqrt)((?:\.[a-z0-9]+)*)\.(f32|f64)\b")
PTX_FORBIDDEN = re.compile(r"\b(fma|mad)(\.[a-z0-9]+)*\.f(16|32|64)\b|\brsqrt\.|\.approx\b|\.ftz\b|\bdiv\.full\b")
OPENCL_STATEMENT = re.compile(r"^\s*(?:float|double)\d*\s+_\w+\s*=\s*(.*);\s*$")
OPENCL_FORBIDDEN = re.compile(r"\b(fma|mad|native_\w+|half_\w+)\s*\(")
BINARY_OP = re.compile(r"\s[-+*/]\s")


def ptx_problems(path):
    problems = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        code = line.split("//")[0]
        if PTX_FORBIDDEN.search(code):
            problems.append(f"{path.name}:{number}: {code.strip()}")
            continue
        m = PTX_FLOAT_OP.match(code)
        if m and ".rn" not in m.group(2):
            problems.append(f"{path.name}:{number}: {code.strip()} (no .rn)")
    return problems


def opencl_sources(path):
    """The OpenCL C programs (NUL-terminated strings) inside a variant's object file."""
    data = path.read_bytes()
    start = data.find(b"/*OpenCL C")
    while start >= 0:
        end = data.find(b"\0", start)
        yield data[start:end].decode("utf-8", errors="replace")
        start = data.find(b"/*OpenCL C", end)


def opencl_problems(path, sources):
    problems = []
    for source in sources:
        for number, line in enumerate(source.splitlines(), 1):
            if OPENCL_FORBIDDEN.search(line):
                problems.append(f"{path.name}:{number}: {line.strip()}")
                continue
            m = OPENCL_STATEMENT.match(line)
            if not m:
                continue
            rhs = re.sub(r"/\*.*?\*/", "", m.group(1))
            rhs = re.sub(r"\[[^\]]*\]", "[]", rhs)  # index arithmetic is integer
            if len(BINARY_OP.findall(rhs)) > 1:
                problems.append(f"{path.name}:{number}: {line.strip()} (several operations in one expression)")
    return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build_dir", type=pathlib.Path)
    parser.add_argument("--cuda", action="store_true")
    parser.add_argument("--opencl", action="store_true")
    args = parser.parse_args()
    ptx = sorted(args.build_dir.glob("magi2_norm*cuda*.device_code"))
    # Each object's programs, read once; objects without one (wrappers) left out.
    opencl = {p: list(opencl_sources(p)) for p in sorted(args.build_dir.glob("magi2_norm*opencl*.o"))}
    opencl = {p: sources for p, sources in opencl.items() if sources}
    problems = []
    if args.cuda and not ptx:
        problems.append("no CUDA device code found")
    if args.opencl and not opencl:
        problems.append("no OpenCL program found")
    for path in ptx:
        problems += ptx_problems(path)
    for path, sources in opencl.items():
        problems += opencl_problems(path, sources)
    for p in problems[:50]:
        print(p)
    print(f"{len(ptx)} PTX files, {len(opencl)} OpenCL programs: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
