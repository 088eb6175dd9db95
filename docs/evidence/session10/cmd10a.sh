#!/usr/bin/env bash
# Session 10 device command A: initcheck over the whole CUDA suite, one process per test, NVIDIA's
# library kernels (cudnn, cublasLt) excluded; beside it the YAML-config fuzz target on the cores left.
# Usage: cmd10a.sh TOOLS JOBS YAML_FORKS FUZZ_SECS
set -u
tools=$1 jobs=$2 yforks=$3 fsecs=$4
mkdir -p build/tests build-fuzz $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
tar xJf .carry/pack/fuzz.tar.xz -C build-fuzz
S=$OUT/summary_$(echo $tools | tr ' ' _).txt
{ date -u; nproc; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; compute-sanitizer --version | tail -1; git log -1 --format=%h; } > $S 2>&1
if [ "$fsecs" -gt 0 ]; then
  ( export FUZZ_TARGETS=fuzz_yaml_config FUZZ_FORK=$yforks
    nice -n 19 fuzz/run_all.sh "$fsecs" > $OUT/fuzz.txt 2>&1; echo "fuzz exit $?" >> $OUT/fuzz.txt ) &
fi
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 SANITIZE_JOBS=$jobs SANITIZE_PARALLEL_TOOLS=1
export SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-400} SANITIZE_SKIP_LIBRARY_KERNELS=1 GTEST_FILTER=${GTEST_FILTER:--*TrainingCurve*}
t0=$SECONDS
timeout ${TOTAL:-520} tools/gpu_sanitize.sh build $tools > $OUT/gpu_sanitize.txt 2>&1
echo "gpu_sanitize exit $? after $((SECONDS - t0)) s" >> $S
O=$OUT/sanitize
{ echo "=== summary (sorted)"; sort $O/summary.txt
  echo "=== runs not clean"; grep -v ' rc 0 ' $O/summary.txt | wc -l
  for f in $(grep -v ' rc 0 ' $O/summary.txt | awk '{print $1"."$2".log"}'); do
    f=$O/$f; [ -f "$f" ] || continue
    echo "=== $(basename $f): $(grep '^\[  FAILED  \]' $f | head -2)"
    grep '^========= [A-Z]' $f | grep -v 'ERROR SUMMARY\|COMPUTE-SANITIZER\|Saved host\|Host Frame' | sed -E 's/ at 0x[0-9a-f]+.*//; s/[0-9,]+ bytes/N bytes/; s/ by thread .*//' | sort | uniq -c | sort -rn | head -6
    echo "--- reports by the kernel that read (last device frame):"
    awk '/^========= [A-Z]/ && !/ERROR SUMMARY|Saved host|Host Frame|Device Frame|COMPUTE-SANITIZER/ {k=""; inrep=1}
         inrep && /Device Frame:/ {k=$0}
         inrep && /^=========     at / && k=="" {a=$0}
         inrep && /Saved host backtrace/ {x=(k!=""?k:a); sub(/^.*Device Frame: /,"",x); sub(/^=========     at /,"",x); sub(/^void /,"",x); gsub(/<unnamed>::/,"",x); sub(/[<(+].*/,"",x); print substr(x,1,110); inrep=0; k=""; a=""}' $f | sort | uniq -c | sort -rn | head -8
    grep -m1 -A10 '^========= \(Invalid\|Program hit\|Error\|Race\|Uninitialized\|Barrier\|Warning\|Leaked\|Potential\)' $f | grep -v 'libcuda\|libcudart\|testing::' | head -9
  done; } >> $S 2>&1
wait
cat $OUT/fuzz.txt >> $S 2>/dev/null
grep -h 'stat::number_of_executed_units\|#[0-9]* *DONE\|exec/s' build-fuzz/fuzz-logs/*yaml* 2>/dev/null | tail -3 >> $S
rm -rf $O $OUT/fuzz.txt
grep -v ' rc 0 ' $S | head -150
