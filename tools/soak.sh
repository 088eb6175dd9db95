#!/usr/bin/env bash
# Kill-and-resume soak (issue 15, docs/HARDENING.md): trains a tiny ESM-2 on the CPU once
# without interruption, then again while SIGKILLing it KILLS times (in turn: at a random
# moment, inside a checkpoint save, just after a checkpoint) and resuming with the same
# command each time, and checks that the interrupted run ends with (when a run completes
# before its kill, that segment is checked and a fresh one starts, until KILLS kills are done)
#   * metrics.jsonl holding every step exactly once, with losses and gradient norms
#     bit-identical to the uninterrupted run's,
#   * a final model.safetensors byte-identical to the uninterrupted run's,
#   * no .tmp_step_* directory left behind.
#
#   tools/soak.sh [--kills N] [--steps N] [--seed N] [--work DIR] [--biofm PATH] [--keep]
#
# Defaults: 20 kills, 40 steps, seed from $RANDOM, work dir under /tmp (removed unless --keep
# or a failure), biofm from build-cpu/ or build/. BIOFM_TEST_SLOW_CHECKPOINT_MS (a test-only
# hook of train/checkpoint.cpp) makes each checkpoint file take 100 ms to write, so kills land
# inside saves. Exit status 0 when everything matches, 1 otherwise (with the difference).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kills=20 steps=40 seed=$RANDOM work="" keep=0 biofm=""
while [ $# -gt 0 ]; do
  case $1 in
    --kills) kills=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --biofm) biofm=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "soak: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$biofm" ]; then
  for b in "$root/build-cpu/biofm" "$root/build/biofm"; do [ -x "$b" ] && biofm=$b && break; done
fi
[ -x "$biofm" ] || { echo "soak: no biofm binary (build it, or pass --biofm PATH)" >&2; exit 2; }
[ -n "$work" ] || work=$(mktemp -d /tmp/biofm_soak.XXXXXX)
rm -rf "$work/ref" "$work/soak"
mkdir -p "$work"
RANDOM=$seed

# A tiny model and a checkpoint every 2 steps; 2 threads so the runs are comparable.
args=(train --config-dir "$root/configs" --config-name esm2_sanity
  dataset.path="$root/data/proteins_sample.fasta" dataset.val_path=null dataset.val_every_n_steps=0
  model.config.hidden_size=32 model.config.num_hidden_layers=2 model.config.num_attention_heads=4
  model.config.intermediate_size=64 dataset.max_seq_length=64 dataset.max_tokens_per_batch=256
  logger.frequency=1 logger.tensorboard=false checkpoint.save_every_n_steps=2 checkpoint.max_checkpoints=3
  scheduler.warmup_steps=4 num_threads=2 num_train_steps="$steps")

now_ms() { echo $(($(date +%s%N) / 1000000)); }
t0=$(now_ms)
"$biofm" "${args[@]}" output_dir="$work/ref" > "$work/ref.log" 2>&1 ||
  { echo "soak: the uninterrupted run failed:"; tail -20 "$work/ref.log"; exit 1; }
ref_ms=$(($(now_ms) - t0))

export BIOFM_TEST_SLOW_CHECKPOINT_MS=100
# Step, loss and grad norm of each record, exactly as written (bit-identical values print
# identically: the JSON writer round-trips doubles). Plain sed, no Python or jq needed.
records() {
  sed -n 's/.*"grad_norm":\([^,}]*\).*"loss":\([^,}]*\).*"step":\([^,}]*\).*/\3 \2 \1/p' "$1"
}

# Checks a finished segment (a run killed and resumed until it completed) against the
# uninterrupted run; sets fail=1 on any difference.
fail=0 total_kills=0 segments=0 resumes=0
check_segment() {
  segments=$((segments + 1))
  if [ "$(records "$work/ref/metrics.jsonl" | wc -l)" -ne "$steps" ]; then
    echo "soak: FAILED: the uninterrupted run logged $(records "$work/ref/metrics.jsonl" | wc -l) steps, not $steps"
    fail=1
  fi
  if ! diff <(records "$work/ref/metrics.jsonl") <(records "$work/soak/metrics.jsonl") > "$work/metrics.diff"; then
    echo "soak: FAILED: metrics differ from the uninterrupted run (< uninterrupted, > killed and resumed):"
    head -20 "$work/metrics.diff"
    fail=1
  fi
  if ! cmp "$work/ref/final_model/model.safetensors" "$work/soak/final_model/model.safetensors"; then
    echo "soak: FAILED: the final models differ"
    fail=1
  fi
  local left
  left=$(ls -a "$work/soak/checkpoints" | grep '^\.tmp_step_' || true)
  if [ -n "$left" ]; then
    echo "soak: FAILED: temporary checkpoint directories left: $left"
    fail=1
  fi
  # (a lower bound: a killed run's buffered stdout is lost)
  resumes=$((resumes + $(grep -c '^resumed from' "$log" || true)))
  echo "segment $segments: $seg_kills kills, compared with the uninterrupted run: $([ $fail -eq 0 ] && echo identical || echo DIFFERENT)"
  mv "$log" "$log.$segments"
  [ $fail -eq 0 ] && rm -rf "$work/soak"
}

log=$work/soak.log
: > "$log"
seg_kills=0 attempts=0 pid=""
trap 'kill -9 $pid 2> /dev/null || true' EXIT  # no run outlives the script
# Segments: a fresh run is killed and resumed until it completes (a kill that comes too late)
# or all kills are done; each is compared with the uninterrupted run.
while [ $fail -eq 0 ] && [ $total_kills -lt "$kills" ]; do
  attempts=$((attempts + 1))
  [ $attempts -gt $((kills * 4 + 10)) ] && { echo "soak: runs keep finishing before the kill; $total_kills kills done" >&2; exit 1; }
  echo "=== run $attempts" >> "$log"
  "$biofm" "${args[@]}" output_dir="$work/soak" >> "$log" 2>&1 &
  pid=$!
  how=""
  newest() { ls "$work/soak/checkpoints" 2> /dev/null | grep '^step_' | sed "s/step_//" | sort -n | tail -1 || true; }
  before=$(newest)
  case $((total_kills % 3)) in
    1)  # inside a save: wait for this run's .tmp_step_* directory, kill 0-0.5 s into it (a
        # save takes >= 0.7 s here: 100 ms per file)
      for _ in $(seq 1 $((ref_ms / 10 + 200))); do
        if compgen -G "$work/soak/checkpoints/.tmp_step_*.$pid" > /dev/null; then
          ms=$((RANDOM % 500))
          sleep "0.$(printf '%03d' $ms)"
          how="${ms} ms into a checkpoint save"
          compgen -G "$work/soak/checkpoints/.tmp_step_*.$pid" > /dev/null || how="$how (it had just finished)"
          break
        fi
        kill -0 $pid 2> /dev/null || break
        sleep 0.01
      done ;;
    2)  # just after a save: wait for a new step_N, kill 0-0.5 s later
      for _ in $(seq 1 $((ref_ms / 10 + 200))); do
        if [ "$(newest)" != "$before" ]; then
          ms=$((RANDOM % 500))
          sleep "0.$(printf '%03d' $ms)"
          how="${ms} ms after a checkpoint"
          break
        fi
        kill -0 $pid 2> /dev/null || break
        sleep 0.01
      done ;;
    *)  # at a random moment in [0, 0.6 x the uninterrupted run's time x the fraction of steps
        # left + 0.2 s] (startup included; the machine's load varies)
      window=$((ref_ms * 6 * (steps - ${before:-0}) / steps / 10 + 200))
      ms=$(((RANDOM * 32768 + RANDOM) % (window + 1)))
      sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
      how="${ms} ms after the start" ;;
  esac
  if kill -9 $pid 2> /dev/null; then
    wait $pid 2> /dev/null || true
    seg_kills=$((seg_kills + 1)) total_kills=$((total_kills + 1))
    last=$(newest)
    tmp=$(ls -a "$work/soak/checkpoints" 2> /dev/null | grep -c '^\.tmp_step_' || true)
    echo "kill $total_kills: $how (newest checkpoint: step ${last:-none}; temporary dirs: $tmp)"
    echo "=== killed: $how" >> "$log"
    [ $total_kills -lt "$kills" ] && continue
    # The last kill: the run resumed once more and left to finish.
    "$biofm" "${args[@]}" output_dir="$work/soak" >> "$log" 2>&1 || { echo "soak: the final run failed:"; tail -20 "$log"; exit 1; }
  else
    wait $pid || { echo "soak: a run failed by itself:"; tail -20 "$log"; exit 1; }
    echo "(run $attempts finished before its kill: the segment is complete)"
  fi
  check_segment
  seg_kills=0
done
if [ "$resumes" -eq 0 ] && [ $fail -eq 0 ]; then
  echo "soak: FAILED: no run resumed from a checkpoint (nothing was tested)"
  fail=1
fi
echo "soak: $total_kills kills in $segments segment(s), $resumes resumes seen, $steps steps, uninterrupted run ${ref_ms} ms," \
  "seed $seed: $([ $fail -eq 0 ] && echo 'losses, grad norms and final model bit-identical' || echo FAILED)"
if [ $fail -eq 0 ] && [ $keep -eq 0 ]; then rm -rf "$work"; else echo "soak: files kept in $work"; fi
exit $fail
