#!/usr/bin/env bash
# Session 29 device command A (one H200): bench/fp8_gelu_pipeline_probe.cu (built on the CPU
# machine against d684181's libbiofm_lib.a, the current CUDA code): the FP8 GELU quantizations
# and the plain quantization, library kernel against a copy that walks many tiles per block and
# stages the next tile in shared memory with cp.async; outputs compared bit for bit first.
# Then ncu (run clocks) on one call of each, for DRAM throughput and issue activity.
set -u
mkdir -p $OUT
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
xz -dc .carry/pack/fp8_gelu_pipeline_probe.xz > /tmp/probe && chmod +x /tmp/probe
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader
  timeout 120 /tmp/probe 50; echo "probe rc $?"; } > $S 2>&1
timeout 240 ncu --clock-control none --kernel-name regex:'quantize_kernel|pipelined_kernel' --launch-skip 0 --launch-count 12 \
  --section SpeedOfLight --section Occupancy --section SchedulerStats --section LaunchStats /tmp/probe 1 > $OUT/ncu.txt 2>&1
echo "ncu rc $?" >> $S
cat $S
grep -E "quantize_kernel|pipelined_kernel|Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Issued Warp|No Eligible|Achieved Occupancy|Registers Per" $OUT/ncu.txt | cut -c1-160 | head -120
