#!/usr/bin/env bash
# The GPU check, in two steps, because the GPU machine has CUDA, CMake, ninja and
# PyTorch but no Halide and no package registry:
#   bash scripts/gpu_check.sh prepare   # here: CUDA variants, the contract tests and the CUDA
#                                       # benchmark (also built with gpu_unroll=1), statically
#                                       # linked, and the library installed for the Python
#                                       # package, packed into gpu_bundle.tar.gz (under 48 MiB,
#                                       # checked: a device call carries at most 64 MiB)
#   bash scripts/gpu_check.sh run       # there (carry gpu_bundle.tar.gz): the forward's and the
#                                       # backward's contract suites on CUDA, the bits recorder's
#                                       # calls against the CPU's digests, the Python package's
#                                       # wheel built against the carried library, installed, and
#                                       # its tests (CUDA ones included), then every MAGI-2 norm at T = 16384 and
#                                       # 65536, forward and backward, against a device-to-device
#                                       # copy, PyTorch eager and torch.compile (autograd for the
#                                       # backward), two tables, and the GPU tuning batch's times
#                                       # (tuning/record.json)
# `run` took under 8 minutes on an H200 before the backward's rows (most of it torch.compile);
# they add each norm's backward to the benchmark and PyTorch steps.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=gpu_bundle

case "${1:-}" in
prepare)
  # The CUDA toolkit (nvcc, cudart_static) is not something setup.sh installs: the benchmark
  # needs one here, as on this project's machines (/usr/local/cuda).
  if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    echo "gpu_check: prepare needs the CUDA toolkit (nvcc; /usr/local/cuda or on PATH)" >&2
    exit 1
  fi
  BUILD_DIR=build-gpu bash scripts/build.sh -DMAGI2NORM_BUILD_GPU_BENCH=ON -DMAGI2NORM_BUILD_BENCHMARKS=OFF \
    -DMAGI2NORM_OPENCL=OFF -DMAGI2NORM_ARM64=OFF "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc"
  # The same benchmark with the GPU schedule's loops not unrolled (gpu_unroll=1), the schedule's
  # one choice not yet measured on a GPU (schedules/gpu_schedule.cpp).
  BUILD_DIR=build-gpu-unroll1 bash scripts/build.sh -DMAGI2NORM_BUILD_GPU_BENCH=ON -DMAGI2NORM_BUILD_BENCHMARKS=OFF \
    -DMAGI2NORM_BUILD_TESTS=OFF -DMAGI2NORM_OPENCL=OFF -DMAGI2NORM_ARM64=OFF -DMAGI2NORM_GPU_PARAMS=gpu_unroll=1 \
    "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc"
  rm -rf "$bundle" && mkdir -p "$bundle"
  cp build-gpu/tests/contract/magi2norm_contract_tests build-gpu/tests/backward/magi2norm_backward_gpu_tests \
    build-gpu/benchmarks/gpu/magi2norm_gpu_bench "$bundle/"
  cp build-gpu-unroll1/benchmarks/gpu/magi2norm_gpu_bench "$bundle/magi2norm_gpu_bench_unroll1"
  # The bits recorder and the CPU's digests: CUDA's outputs must be the same bits.
  cp build-gpu/tests/bits/magi2norm_bits tests/bits/digests.txt "$bundle/"
  # The golden files travel with the bundle: ../shared beside the checkout does not.
  cp -r ../shared/golden "$bundle/golden"
  # A GPU tuning batch (docs/tuning.md): the candidates' CUDA variants for the model's norms at
  # T = 16384, made here; magi2-tune-measure times them there; back here,
  # `build-gpu/tuning/magi2-tune --select --backend cuda --record <the returned record>` keeps
  # each class's best.
  build-gpu/tuning/magi2-tune --backend cuda --tokens 16384 --random 4 \
    --record "$bundle/tuning/record.json" --cache "$bundle/tuning/cache"
  cp build-gpu/tuning/magi2-tune-measure "$bundle/"
  # The library for the Python package's build there, and DLPack's header, which its CMake
  # package finds on the host (the GPU machine may not have it).
  .venv/bin/cmake --install build-gpu --prefix "$bundle/prefix" >/dev/null
  mkdir -p "$bundle/include/dlpack" && cp /usr/include/dlpack/dlpack.h "$bundle/include/dlpack/"
  # pytest's wheels (pure Python), for a machine without it and without a registry.
  .venv/bin/pip download -q --disable-pip-version-check -d "$bundle/wheels" "$(grep '^pytest==' python/requirements.txt)"
  tar -czf "$bundle.tar.gz" "$bundle"
  size=$(stat -c %s "$bundle.tar.gz")
  echo "gpu_check: $bundle.tar.gz is $((size / 1048576)) MiB"
  if [ "$size" -gt $((48 << 20)) ]; then
    echo "gpu_check: $bundle.tar.gz is over 48 MiB: a device call carries at most 64 MiB with the tree" >&2
    exit 1
  fi
  echo "gpu_check: ready; carry $bundle.tar.gz to the GPU machine and run: bash scripts/gpu_check.sh run"
  ;;
run)
  [ -d "$bundle" ] || tar -xzf "$bundle.tar.gz"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  echo "== contract suite on the cuda backend (host views staged through the device)"
  # The 2.2 GB input test runs elsewhere; the golden files came in the bundle.
  # A failing step is reported and the next still runs: one device run has to show all of it.
  # The exit status says whether any step failed.
  failed=0
  MAGI2NORM_BACKEND=cuda MAGI2NORM_GOLDEN_DIR="$PWD/$bundle/golden" \
    timeout 300 "$bundle/magi2norm_contract_tests" --gtest_brief=1 --gtest_filter='-*Large*' | tail -n 60 ||
    { failed=1; echo "gpu_check: the contract suite FAILED on cuda"; }
  echo "== the backward's contract suite on the cuda backend (host views staged through the device)"
  MAGI2NORM_BACKEND=cuda timeout 120 "$bundle/magi2norm_backward_gpu_tests" --gtest_brief=1 | tail -n 30 ||
    { failed=1; echo "gpu_check: the backward suite FAILED on cuda"; }
  echo "== the same bits as the CPU: the bits recorder's calls on cuda against the CPU's digests"
  MAGI2NORM_GOLDEN_DIR="$PWD/$bundle/golden" timeout 120 "$bundle/magi2norm_bits" check "$bundle/digests.txt" \
    --target cuda | tail -n 40 ||
    { failed=1; echo "gpu_check: CUDA's bits DIFFER from the CPU's"; }
  echo "== the Python package's wheel, built against the carried library and this torch, installed, and its tests (CUDA included)"
  python3 -m pytest --version >/dev/null 2>&1 ||
    python3 -m pip install -q --no-index --find-links "$bundle/wheels" pytest || true
  timeout 240 python3 -m pip wheel -q --no-build-isolation --no-deps -w "$bundle/dist" \
    -C "cmake.define.CMAKE_PREFIX_PATH=$PWD/$bundle/prefix" \
    -C "cmake.define.MAGI2NORM_DLPACK_INCLUDE_DIR=$PWD/$bundle/include" ./python &&
    python3 -m pip install -q --no-deps --force-reinstall "$bundle"/dist/magi2norm-*.whl &&
    timeout 300 python3 -m pytest -q python/tests | tail -n 15 ||
    { failed=1; echo "gpu_check: the Python package FAILED"; }
  echo "== benchmark (device memory, caller's stream)"
  timeout 180 "$bundle/magi2norm_gpu_bench" --tokens 16384,65536 > "$bundle/ours.jsonl" ||
    { failed=1; echo "gpu_check: the benchmark FAILED"; }
  timeout 180 "$bundle/magi2norm_gpu_bench_unroll1" --tokens 16384,65536 > "$bundle/unroll1.jsonl" ||
    { failed=1; echo "gpu_check: the gpu_unroll=1 benchmark FAILED"; }
  timeout 300 python3 scripts/gpu_torch_peer.py --tokens 16384,65536 > "$bundle/torch.jsonl" ||
    { failed=1; echo "gpu_check: the PyTorch peer FAILED (its columns show nan)"; }
  echo "== tuning batch (the GPU knobs' candidates, against a device-to-device copy)"
  timeout 120 "$bundle/magi2-tune-measure" --record "$bundle/tuning/record.json" --cache "$bundle/tuning/cache" \
    --backend cuda || { failed=1; echo "gpu_check: the tuning batch FAILED"; }
  if [ -n "${OUT:-}" ]; then cp "$bundle"/*.jsonl "$bundle/tuning/record.json" "$OUT/"; fi
  python3 - "$bundle/ours.jsonl" "$bundle/torch.jsonl" "$bundle/unroll1.jsonl" <<'PY'
import json, sys
key = lambda r: (r.get("pass", "forward"), r["name"], r["tokens"])
ours = [json.loads(l) for l in open(sys.argv[1])]
torch = {key(r): r for r in map(json.loads, open(sys.argv[2]))}
unroll1 = {key(r): r for r in map(json.loads, open(sys.argv[3]))}
for pass_name in ("forward", "backward"):
    print(f"\n{pass_name}:\n")
    print(f"| norm | T | in->out | ours ms | TB/s | of D2D copy | eager ms | compile ms | vs eager | vs compile | "
          f"max rel err | unroll=1 ms | unroll=1 of D2D |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in ours:
        if r.get("pass", "forward") != pass_name:
            continue
        t = torch.get(key(r), {})
        u = unroll1.get(key(r), {})
        e, c = t.get("eager_ms", float("nan")), t.get("compile_ms", float("nan"))
        print(f"| {r['name']} | {r['tokens']} | {r['in_dtype']}->{r['out_dtype']} | {r['ms']:.3f} | {r['tbps']:.2f} | "
              f"{r['fraction_of_copy']:.2f} | {e:.3f} | {c:.3f} | {e / r['ms']:.2f}x | {c / r['ms']:.2f}x | "
              f"{r['max_rel_err']:.1e} | {u.get('ms', float('nan')):.3f} | {u.get('fraction_of_copy', float('nan')):.2f} |")
PY
  exit "$failed"
  ;;
*)
  sed -n '2,10p' "$0"
  exit 2
  ;;
esac
