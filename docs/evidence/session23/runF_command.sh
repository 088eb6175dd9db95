#!/usr/bin/env bash
# Session 23 device command F (H100): the whole CUDA suite on 44a2011 (without the long CPU-curve
# tests); then ncu kernel times of the GELU bench with its kernel copies (runC_variants.cu.txt):
# is the library kernel itself slower than its copy, or the launches around it (the accumulator's
# reset, the column sums' finishing pass)?
set -u
mkdir -p build/tests $OUT
for b in fp8_gelu_bench_var; do xz -dc .carry/pack/$b.xz > build/$b && chmod +x build/$b; done
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 40 build/fp8_gelu_bench_var 50 >> $S 2>&1
timeout 90 ncu --metrics gpu__time_duration.sum --csv build/fp8_gelu_bench_var 3 > $OUT/ncu_var.csv 2>/dev/null
echo "ncu rc $?" >> $S
python3 - $OUT/ncu_var.csv >> $S <<'PY'
import csv, sys, re
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value")
prev = None; n = 0; tot = 0.0
out = []
for r in rows[1:]:
    name = re.sub(r"\(.*", "", r[k])[:100]
    if name != prev and prev is not None:
        out.append(f"{n:4d} x {tot / n / 1e3:8.1f} us  {prev}"); n = 0; tot = 0.0
    prev = name; n += 1; tot += float(r[v].replace(",", ""))
out.append(f"{n:4d} x {tot / n / 1e3:8.1f} us  {prev}")
print("\n".join(out))
PY
timeout 330 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -60 >> $S
tail -c 60000 /tmp/cuda_tests.log > $OUT/cuda_tests_tail.log
cat $S
