#!/usr/bin/env bash
# Session 24 device command A (H100): bench/wgrad_overlap_bench.cu (built here with
#   nvcc -std=c++17 -O2 -arch=sm_90a bench/wgrad_overlap_bench.cu -lcublasLt -o .carry/pack/wgrad_overlap_bench).
cd .carry/pack && nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv && ./wgrad_overlap_bench 6 2>&1 | tee $OUT/wgrad_overlap.txt
