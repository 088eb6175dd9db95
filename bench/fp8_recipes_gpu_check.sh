#!/usr/bin/env bash
# The precision recipes on one Hopper GPU (docs/PRECISION.md), from the repository root with the
# CUDA build in build/ (cmake -S . -B build -G Ninja && cmake --build build --target biofm biofm_cuda_tests):
#   1. the FP8 / delayed-scaling / block-scaled CUDA tests (kernels bit for bit against the CPU,
#      training against bf16: the curves are printed);
#   2. what cuBLASLt offers for Float8BlockScaling on this GPU (bench/fp8_blockscale_probe.cu);
#   3. ESM-2 650M throughput, bf16 vs FP8 current scaling vs FP8 delayed scaling (same command).
# Usage: bench/fp8_recipes_gpu_check.sh [OUT_DIR]   (default /tmp/fp8_check)
set -uo pipefail
out=${1:-/tmp/fp8_check}
mkdir -p "$out"
build/tests/biofm_cuda_tests --gtest_filter='CudaFp8*:CudaFp8Delayed*:CudaBlockScale*' 2>&1 | tee "$out/cuda_tests.txt"
if command -v nvcc >/dev/null; then
  nvcc -std=c++17 -O2 -arch=sm_90a bench/fp8_blockscale_probe.cu -lcublasLt -o "$out/fp8_blockscale_probe" &&
    "$out/fp8_blockscale_probe" 2>&1 | tee "$out/probe.txt"
else
  echo "no nvcc here: build bench/fp8_blockscale_probe.cu elsewhere (see its header)" | tee "$out/probe.txt"
fi
common=(--model esm2 --shape 650M --data data/proteins_sample.fasta --tokens-per-batch 16384 --max-seq-length 1024)
build/biofm bench "${common[@]}" --json "$out/bf16.json" 2>&1 | tail -3
build/biofm bench "${common[@]}" --fp8 --json "$out/fp8_current.json" 2>&1 | tail -3
build/biofm bench "${common[@]}" --fp8 fp8_config.fp8_recipe=DelayedScaling --json "$out/fp8_delayed.json" 2>&1 | tail -3
