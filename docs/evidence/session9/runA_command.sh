#!/usr/bin/env bash
# Session 9 device command: TOOLS under compute-sanitizer, the CUDA suite in 6 gtest shards per tool
# (all at once), beside a nice'd fuzz campaign on the cores left. Usage: cmd9.sh "TOOLS" FUZZ_SECS
set -u
tools=$1 fsecs=$2
mkdir -p build/tests build-fuzz $OUT
[ -x build/biofm ] || { xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm; }
[ -x build/tests/biofm_cuda_tests ] || { xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests; }
[ -d build-fuzz/fuzz ] || tar xJf .carry/pack/fuzz.tar.xz -C build-fuzz
S=$OUT/summary.txt
{ date -u; nproc; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; compute-sanitizer --version | tail -1
  compute-sanitizer --help | grep -i -A3 'kernel-name-exclude' | head -8; } > $S 2>&1
if [ "$fsecs" -gt 0 ]; then
  ( export FUZZ_PARALLEL=1 FUZZ_FORK=1 FUZZ_FORK_fuzz_yaml_config=3 FUZZ_FORK_fuzz_reader=2
    nice -n 19 fuzz/run_all.sh "$fsecs" > $OUT/fuzz.txt 2>&1; echo "fuzz exit $?" >> $OUT/fuzz.txt ) &
fi
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 SANITIZE_SHARDS=6 SANITIZE_PARALLEL_TOOLS=1
export SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-470} SANITIZE_SKIP_CUDNN=1 GTEST_FILTER='-*TrainingCurve*'
t0=$SECONDS
tools/gpu_sanitize.sh build $tools > $OUT/gpu_sanitize.txt 2>&1
echo "gpu_sanitize exit $? after $((SECONDS - t0)) s" >> $S
O=$OUT/sanitize
{ echo "=== summary"; cat $O/summary.txt
  for f in $O/*.log; do
    echo "=== $(basename $f): $(grep -c '^\[       OK \]' $f) ok, $(grep -c '^\[  FAILED  \]' $f) failed lines; last run: $(grep '^\[ RUN' $f | tail -1)"
    grep -m3 '^\[  FAILED  \]' $f
    grep -m1 -B1 -A14 '^========= \(Invalid\|Program hit\|Error\|Race\|Uninitialized\|Barrier\|Warning\|Leaked\|Potential\)' $f
  done; } >> $S 2>&1
wait
cat $OUT/fuzz.txt >> $S 2>/dev/null
rm -rf $O $OUT/fuzz.txt
tar czf $OUT/fuzzcorpus.tgz -C build-fuzz fuzz-corpus fuzz-crashes 2>/dev/null
cat $S | head -150
