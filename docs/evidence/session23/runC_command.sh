#!/usr/bin/env bash
# Session 23 device command C (H100): the GELU quantization after run B's change, against copies
# of its kernel (an experiment: bench/fp8_gelu_bench.cpp built with runC_variants.cu.txt included,
# a file kept only here): the amax folded per block (one atomic per block) and erf evaluated three
# ways; then where the ESM-2 650M FP8 DelayedScaling step goes now (ncu kernel times, one step).
set -u
mkdir -p build $OUT
for b in biofm fp8_gelu_bench_var; do xz -dc .carry/pack/$b.xz > build/$b && chmod +x build/$b; done
export OMP_NUM_THREADS=16 LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader
timeout 60 build/fp8_gelu_bench_var 50 > $OUT/fp8_gelu_bench_var.txt 2>&1; echo "bench rc $?"; cat $OUT/fp8_gelu_bench_var.txt
timeout 330 ncu --metrics gpu__time_duration.sum --csv build/biofm bench --model esm2 --shape 650M \
  --data .carry/data/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 1 --warmup 1 --fp8 \
  fp8_config.fp8_recipe=DelayedScaling > $OUT/ncu_esm2_650M_fp8_delayed.csv 2> /tmp/ncu.log
echo "ncu rc $?"; tail -3 /tmp/ncu.log
python3 tools/ncu_summary.py $OUT/ncu_esm2_650M_fp8_delayed.csv > $OUT/ncu_esm2_650M_fp8_delayed_summary.txt 2>&1
head -40 $OUT/ncu_esm2_650M_fp8_delayed_summary.txt; gzip -f $OUT/ncu_esm2_650M_fp8_delayed.csv
