#!/usr/bin/env bash
# Session 24 device command F (H100): bench/optimizer_overlap_probe.cu (built here with
#   nvcc -std=c++17 -O2 -arch=sm_90a bench/optimizer_overlap_probe.cu -lcublasLt -o .carry/pack/opt_overlap).
.carry/pack/opt_overlap 2>&1 | tee $OUT/opt_overlap.txt
