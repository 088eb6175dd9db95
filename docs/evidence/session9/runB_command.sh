#!/usr/bin/env bash
# Session 9 device command: TOOLS under compute-sanitizer, one process per CUDA test, JOBS per tool at once,
# tools in parallel, beside a nice'd fuzz campaign. Usage: cmd9b.sh "TOOLS" JOBS FUZZ_SECS
set -u
tools=$1 jobs=$2 fsecs=$3
mkdir -p build/tests build-fuzz $OUT
[ -x build/biofm ] || { xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm; }
[ -x build/tests/biofm_cuda_tests ] || { xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests; }
[ -d build-fuzz/fuzz ] || tar xJf .carry/pack/fuzz.tar.xz -C build-fuzz
S=$OUT/summary_$(echo $tools | tr ' ' _).txt
{ date -u; nproc; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; compute-sanitizer --version | tail -1; } > $S 2>&1
if [ "$fsecs" -gt 0 ]; then
  ( export FUZZ_PARALLEL=1 FUZZ_FORK=1 FUZZ_FORK_fuzz_yaml_config=${YAML_FORKS:-3} FUZZ_FORK_fuzz_reader=2
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
    grep -m1 -A10 '^========= \(Invalid\|Program hit\|Error\|Race\|Uninitialized\|Barrier\|Warning\|Leaked\|Potential\)' $f | grep -v 'libcuda\|libcudart\|testing::' | head -9
  done; } >> $S 2>&1
wait
cat $OUT/fuzz.txt >> $S 2>/dev/null
rm -rf $O $OUT/fuzz.txt
tar czf $OUT/fuzzcorpus.tgz -C build-fuzz fuzz-corpus fuzz-crashes 2>/dev/null
grep -v ' rc 0 ' $S | head -120
