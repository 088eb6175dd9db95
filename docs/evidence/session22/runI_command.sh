#!/usr/bin/env bash
# Session 22 device command I (H100): ncu's full section set for the FP8 GELU quantization kernels
# (forward Src::Gelu and backward Src::GeluGrad) and the norm writing codes, in an ESM-2 650M FP8
# DelayedScaling step: what bounds them (compute or memory, stall reasons).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export OMP_NUM_THREADS=16 LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 250 ncu --set full --kernel-name-base demangled \
  --kernel-name regex:"quantize_kernel<__nv_bfloat16, (0, 0, 1|1, 1, 2)>|record_kernel<__nv_bfloat16>" \
  --launch-skip 10 --launch-count 6 \
  build/biofm bench --model esm2 --shape 650M --data .carry/data/uniprot_8k.fasta.gz --tokens-per-batch 16384 \
  --steps 1 --warmup 1 --fp8 fp8_config.fp8_recipe=DelayedScaling > $OUT/ncu_full.txt 2> /tmp/ncu.log
echo "ncu rc $?"; tail -3 /tmp/ncu.log
grep -E "quantize_kernel|norm_forward_kernel|record_kernel|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Issue Slots Busy|One or More Eligible|Block Limit" $OUT/ncu_full.txt | head -150
gzip -f $OUT/ncu_full.txt
