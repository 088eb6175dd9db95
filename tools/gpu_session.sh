#!/usr/bin/env bash
# One GPU-machine session: CUDA tests, throughput benchmarks and the Hugging Face peer runs.
# Usage (on the device, from the repo root): tools/gpu_session.sh BIN_DIR OUT_DIR [what...]
#   what: tests esm esm_ga esm3b llama llama_ga peer peer_llama peer_llama_ga peer_compiled profile_llama
#         export og2_7b fp8_tests llama_fp8 llama_32k esm_fp8 profile_llama_fp8 og2_7b_fp8
#   (tests takes TESTS=gtest-filter, default all)
#   (default: tests esm llama)
# Data (env): DATA (proteins, default .carry/data/uniprot_20k.fasta.gz) and DNA_LONG (long DNA
# records for 8192-token windows; default: lambda phage + Shigella plasmids from .carry/data).
set -uo pipefail
BIN=$1; OUT=$2; shift 2
WHAT=${*:-tests esm llama}
DATA=${DATA:-.carry/data/uniprot_20k.fasta.gz}
DNA_LONG=${DNA_LONG:-/tmp/dna_long.fasta}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
if [ ! -s "$DNA_LONG" ]; then
  zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > "$DNA_LONG"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
"$BIN/biofm" info | tee -a "$OUT/gpu.txt"
bench() {  # bench NAME ARGS...: one `biofm bench` run, JSON + last line kept
  local name=$1; shift
  "$BIN/biofm" bench "$@" --json "$OUT/$name.json" 2>&1 | tail -1 | tee -a "$OUT/bench.txt"
}
for w in $WHAT; do
  echo "== $w $(date +%T)" | tee -a "$OUT/bench.txt"
  case $w in
    tests)
      "$BIN/biofm_cuda_tests" --gtest_filter="${TESTS:-*}" 2>&1 | tee "$OUT/cuda_tests.log" \
        | grep -E "^\[  (PASSED|FAILED)|FAILED|\[curve|\[fp8 curve" ;;
    fp8_tests)
      "$BIN/biofm_cuda_tests" --gtest_filter='CudaFp8*:CudaGemm*' 2>&1 | tee "$OUT/cuda_tests_fp8.log" \
        | grep -E "^\[  (PASSED|FAILED)|FAILED|\[fp8 curve|noted once" ;;
    llama_fp8)  # the `llama` and `llama_ga` runs with FP8 GEMMs in the layers
      bench ours_llama_1B_8k_fp8 --model llama --shape 1B --data "$DNA_LONG" --tokens-per-batch 8192 \
        --max-seq-length 8192 --fp8 --steps 20 --warmup 5
      bench ours_llama_1B_16k_ga4_fp8 --model llama --shape 1B --data "$DNA_LONG" --tokens-per-batch 16384 \
        --max-seq-length 8192 --grad-acc 4 --fp8 --steps 6 --warmup 2 ;;
    llama_32k)  # the same 8 windows per optimizer step as 4 windows x 2 micro batches, bf16 and FP8
      bench ours_llama_1B_32k_ga2 --model llama --shape 1B --data "$DNA_LONG" --tokens-per-batch 32768 \
        --max-seq-length 8192 --grad-acc 2 --steps 6 --warmup 2
      bench ours_llama_1B_32k_ga2_fp8 --model llama --shape 1B --data "$DNA_LONG" --tokens-per-batch 32768 \
        --max-seq-length 8192 --grad-acc 2 --fp8 --steps 6 --warmup 2 ;;
    llama_fp8_ga)  # only the recipe-batch FP8 run
      bench ours_llama_1B_16k_ga4_fp8_${RUN_TAG:-a} --model llama --shape 1B --data "$DNA_LONG" --tokens-per-batch 16384 \
        --max-seq-length 8192 --grad-acc 4 --fp8 --steps 6 --warmup 2 ;;
    esm_fp8)
      bench ours_esm2_650M_fp8 --model esm2 --shape 650M --data "$DATA" --tokens-per-batch 16384 --fp8 --steps 20 \
        --warmup 8 ;;
    profile_llama_fp8)
      ncu --metrics gpu__time_duration.sum --csv "$BIN/biofm" bench --model llama --shape 1B --fp8 \
        --data "$DNA_LONG" --tokens-per-batch 8192 --max-seq-length 8192 --steps 1 --warmup 1 \
        > "$OUT/ncu_llama_1B_8k_fp8.csv" 2> "$OUT/ncu.log"
      gzip -f "$OUT/ncu_llama_1B_8k_fp8.csv"; tail -3 "$OUT/ncu.log" ;;
    esm)
      bench ours_esm2_35M --model esm2 --shape 35M --data "$DATA" --tokens-per-batch 16384 --steps 20 --warmup 8
      bench ours_esm2_650M --model esm2 --shape 650M --data "$DATA" --tokens-per-batch 16384 --steps 20 --warmup 8 ;;
    esm_ga)  # the recipe's way to a large global batch: 4 micro batches of 16k tokens per optimizer step
      bench ours_esm2_650M_ga4 --model esm2 --shape 650M --data "$DATA" --tokens-per-batch 16384 --grad-acc 4 \
        --steps 8 --warmup 3
      bench ours_esm2_3B_rl${RECOMPUTE_3B:-18}_ga4 --model esm2 --shape 3B --data "$DATA" --tokens-per-batch 16384 \
        --recompute --recompute-layers "${RECOMPUTE_3B:-18}" --grad-acc 4 --steps 4 --warmup 2 ;;
    llama_ga)  # 8 windows of 8192 per optimizer step per GPU, as OpenGenome2 (384 windows on 48 GPUs)
      bench ours_llama_1B_16k_ga4 --model llama --shape 1B --data "$DNA_LONG" --tokens-per-batch 16384 \
        --max-seq-length 8192 --grad-acc 4 --steps 6 --warmup 2 ;;
    peer_llama_ga)
      python3 bench/hf_peer_bench.py --model llama --shape 1B --data "$DNA_LONG" --seq-length 8192 --micro-batch 2 \
        --grad-acc 4 --steps 6 --warmup 2 --json "$OUT/hf_llama_1B_mb2_ga4.json" 2>&1 | tail -1 | tee -a "$OUT/bench.txt" ;;
    esm3b)
      bench ours_esm2_3B_recompute_all --model esm2 --shape 3B --data "$DATA" --tokens-per-batch 16384 --recompute \
        --steps 8 --warmup 4
      bench ours_esm2_3B_recompute_${RECOMPUTE_3B:-12} --model esm2 --shape 3B --data "$DATA" --tokens-per-batch 16384 \
        --recompute --recompute-layers "${RECOMPUTE_3B:-12}" --steps 8 --warmup 4 ;;
    llama)
      bench ours_llama_1B_8k --model llama --shape 1B --data "$DNA_LONG" --tokens-per-batch 8192 --max-seq-length 8192 \
        --steps 20 --warmup 5
      bench ours_llama_1B_16k --model llama --shape 1B --data "$DNA_LONG" --tokens-per-batch 16384 --max-seq-length 8192 \
        --steps 12 --warmup 4 ;;
    peer)
      python3 bench/hf_peer_bench.py --model esm2 --shape 650M --data "$DATA" --tokens-per-batch 16384 \
        --max-seq-length 1024 --steps 15 --warmup 5 --json "$OUT/hf_esm2_650M_eager.json" 2>&1 | tail -1 | tee -a "$OUT/bench.txt" ;;
    peer_compiled)
      python3 bench/hf_peer_bench.py --model esm2 --shape 650M --data "$DATA" --tokens-per-batch 16384 \
        --max-seq-length 1024 --pad-to-multiple-of 64 --steps 10 --warmup 6 --compile --json "$OUT/hf_esm2_650M_compiled.json" 2>&1 | tail -1 | tee -a "$OUT/bench.txt" ;;
    peer_llama)  # the same windows as `llama`: 1 and 2 windows of 8192 tokens per step
      for mb in 1 2; do
        python3 bench/hf_peer_bench.py --model llama --shape 1B --data "$DNA_LONG" --seq-length 8192 --micro-batch $mb \
          --steps 10 --warmup 4 --json "$OUT/hf_llama_1B_mb$mb.json" 2>&1 | tail -1 | tee -a "$OUT/bench.txt"
      done ;;
    profile_llama)  # per-kernel GPU time (ncu) of 2 steps of the 1B 8k bench; the 2nd is the one to read
      ncu --metrics gpu__time_duration.sum --csv "$BIN/biofm" bench --model llama --shape 1B \
        --data "$DNA_LONG" --tokens-per-batch 8192 --max-seq-length 8192 --steps 1 --warmup 1 \
        > "$OUT/ncu_llama_1B_8k.csv" 2> "$OUT/ncu.log"
      gzip -f "$OUT/ncu_llama_1B_8k.csv"; tail -3 "$OUT/ncu.log" ;;
    profile_esm)  # the same for ESM-2 650M, 16k-token packed batches
      ncu --metrics gpu__time_duration.sum --csv "$BIN/biofm" bench --model esm2 --shape 650M \
        --data "$DATA" --tokens-per-batch 16384 --steps 1 --warmup 1 > "$OUT/ncu_esm2_650M.csv" 2> "$OUT/ncu.log"
      gzip -f "$OUT/ncu_esm2_650M.csv"; tail -3 "$OUT/ncu.log" ;;
    export)
      # A Llama trained here for 30 steps, exported, then loaded by the GPU machine's transformers.
      "$BIN/biofm" train --config-name llama3_sanity device=cuda num_train_steps=30 output_dir=/tmp/llama_export_run \
        dataset.val_every_n_steps=0 > "$OUT/export_train.log" 2>&1
      python3 tools/check_llama_export.py --model /tmp/llama_export_run/final_model --fasta data/dna_val.fasta \
        --biofm "$BIN/biofm" 2>&1 | tee "$OUT/llama_export_check.txt" | tail -8 ;;
    og2_7b_fp8)  # the og2_7b_fp8 config's FP8 GEMMs, 1 window per step, and the bf16 run beside it
      bench ours_og2_7b_fp8 --model llama --shape 7B --data "$DNA_LONG" --tokens-per-batch 8192 --max-seq-length 8192 \
        --recompute --fp8 --steps ${STEPS_7B:-6} --warmup 3
      bench ours_og2_7b --model llama --shape 7B --data "$DNA_LONG" --tokens-per-batch 8192 --max-seq-length 8192 \
        --recompute --steps ${STEPS_7B:-6} --warmup 3 ;;
    og2_7b)
      bench ours_og2_7b --model llama --shape 7B --data "$DNA_LONG" --tokens-per-batch 8192 --max-seq-length 8192 \
        --recompute --steps ${STEPS_7B:-6} --warmup 3 ;;
  esac
done
