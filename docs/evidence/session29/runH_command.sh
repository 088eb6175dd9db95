#!/usr/bin/env bash
# Session 29 device command H (one H200): a604511 (new: the quantization kernel without runtime
# pointer checks when q and q_t are both given) and d684181 (old:
# session 28's final CUDA code). The probe linked against the new library, then alternating end
# to end (ESM-2 650M FP8 DelayedScaling and current scaling), then the CUDA tests of the FP8,
# norm, activation, block-scaling, FP8-attention, side-stream and ESM-2 suites and the backend-ops
# table on a604511.
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
for b in biofm biofm_old; do xz -dc .carry/pack/$b.xz > build/$b && chmod +x build/$b; done
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
xz -dc .carry/pack/fp8_gelu_pipeline_probe.xz > /tmp/probe && chmod +x /tmp/probe
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
timeout 90 /tmp/probe 50 > $OUT/probe.txt 2>&1
echo "probe rc $? $(tail -1 $OUT/probe.txt)" >> $S
grep -E "^[a-z]|^  (library|min/max \+ swizzled tile|swizzled tile|library copy, no checks) " $OUT/probe.txt | sed -n '/^arithmetic/,$p' | head -40 >> $S
D=.carry/data
B() {  # name, binary, extra args...
  local name=$1 bin=$2; shift 2
  timeout 75 build/$bin bench "$@" --json /tmp/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | cut -c1-100 | sed 's/^/    /' >> $S
  grep -E "^ +(mlp|attention) (forward|backward)" /tmp/$name.log | cut -c1-120 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8 profiler.range_times=true profiler.start_step=10 profiler.end_step=20"
for i in 1 2 3; do
  for b in biofm biofm_old; do B esm_fp8d_${b}_$i $b $E --fp8 fp8_config.fp8_recipe=DelayedScaling; done
done
for b in biofm biofm_old; do B esm_fp8c_$b $b $E --fp8; done
timeout 200 build/tests/biofm_cuda_tests --gtest_filter='CudaFp8*:CudaNorm*:CudaActivation*:CudaBlockScale*:CudaAttentionFp8*:CudaSideStream*:CudaEsm2*:BackendOps*' > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -60 >> $S
tail -c 20000 /tmp/cuda_tests.log > /tmp/cuda_tests_tail.log
tar czf $OUT/runH_logs.tgz -C /tmp cuda_tests_tail.log $(cd /tmp && ls esm_*.json esm_*.log 2>/dev/null)
cat $S
