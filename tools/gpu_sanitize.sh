#!/usr/bin/env bash
# The CUDA test binaries under NVIDIA compute-sanitizer (issue 15, docs/HARDENING.md).
#
#   tools/gpu_sanitize.sh [BUILD_DIR] [TOOL ...]
#
# BUILD_DIR (default: build) is a CUDA build whose test binaries exist; TOOLs are any of
# memcheck racecheck initcheck synccheck (default: all four, one after another). The test
# binaries are the ones `ctest -L cuda` runs, found from ctest's own listing, so the script
# follows the build's layout. Each binary runs whole under each tool (gtest discovers the tests
# inside it); short `biofm train` runs of ESM-2 and Llama on the GPU run under memcheck and
# initcheck too (paths the unit tests do not reach: prefetch, data upload, checkpoint writing).
#
# Logs: $OUT/sanitize/<tool>.<binary>.log (OUT defaults to ./sanitize-out), and a summary line
# per run in $OUT/sanitize/summary.txt: tool, binary, exit status, seconds, the sanitizer's
# "ERROR SUMMARY" line. Exit status 1 when any run reported an error or failed.
# Environment: GTEST_FILTER narrows the tests (e.g. to fit a time limit); SANITIZE_TIMEOUT
# (seconds per run, default 1800; keep a whole call under a machine time limit with it) stops a
# run that takes too long (reported as a failure). SANITIZE_JOBS=N runs each test in a process
# of its own under the tool, N at a time (a test that hangs costs only itself, and each report
# names its test); SANITIZE_PARALLEL_TOOLS=1 runs the tools at the same time too.
# SANITIZE_SKIP_LIBRARY_KERNELS=1 leaves NVIDIA's library kernels (names containing cudnn or
# cublasLt) out of synccheck: cuDNN 9.14's fused attention backward trips synccheck inside
# NVIDIA's code (docs/HARDENING.md). It does not apply to initcheck: initcheck does not record the
# stores of an excluded kernel, so every later read of a GEMM or attention output would be
# reported as uninitialized (measured: 19 false reports on the H100, session 10). memcheck,
# racecheck and initcheck always check every kernel.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ $# -gt 0 ] && shift
tools=${*:-memcheck racecheck initcheck synccheck}
out=${OUT:-$root/sanitize-out}/sanitize
limit=${SANITIZE_TIMEOUT:-1800}
mkdir -p "$out"

cs=$(command -v compute-sanitizer || true)
[ -z "$cs" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && cs=/usr/local/cuda/bin/compute-sanitizer
if [ -z "$cs" ]; then
  echo "gpu_sanitize: compute-sanitizer not found (PATH, /usr/local/cuda/bin)" >&2
  exit 2
fi
[ -d "$build" ] || { echo "gpu_sanitize: no build directory $build" >&2; exit 2; }

# The executables of the tests labelled cuda, from ctest's JSON listing.
mapfile -t binaries < <(ctest --test-dir "$build" -L cuda --show-only=json-v1 2>/dev/null |
  python3 -c 'import json, sys
seen = []
for t in json.load(sys.stdin).get("tests", []):
    cmd = t.get("command") or []
    if cmd and cmd[0] not in seen:
        seen.append(cmd[0])
print("\n".join(seen))' 2>/dev/null)
# A build made elsewhere and copied here lists the paths of where it was made: look each
# binary up by name under the build directory; without a listing, take the test executables
# named *cuda*test* in the build directory (tests/biofm_cuda_tests in ours).
found=()
for b in "${binaries[@]}"; do
  [ -n "$b" ] || continue
  [ -x "$b" ] || b=$(find "$build" -type f -name "$(basename "$b")" -perm -u+x 2>/dev/null | head -1)
  [ -n "$b" ] && found+=("$b")
done
[ ${#found[@]} -gt 0 ] || mapfile -t found < <(find "$build" -maxdepth 3 -type f -perm -u+x -name '*cuda*test*' 2>/dev/null)
if [ ${#found[@]} -eq 0 ]; then
  echo "gpu_sanitize: no CUDA test binary in $build (ctest -L cuda lists none; no *cuda*test* executable)" >&2
  exit 2
fi
binaries=("${found[@]}")
biofm=$build/biofm

status=0
: > "$out/summary.txt"
run_one() {  # run_one TOOL NAME COMMAND...
  local tool=$1 name=$2
  shift 2
  local log=$out/$tool.$name.log extra=()
  case $tool in
    memcheck) extra=(--leak-check full) ;;
    racecheck) extra=(--racecheck-report all) ;;
    synccheck) [ "${SANITIZE_SKIP_LIBRARY_KERNELS:-0}" = 1 ] &&
      extra=(--kernel-name-exclude kns=cudnn --kernel-name-exclude kns=cublasLt) ;;
  esac
  local t0=$SECONDS rc
  timeout "$limit" "$cs" --tool "$tool" "${extra[@]}" --error-exitcode 99 --log-file "$log.sanitizer" "$@" > "$log" 2>&1
  rc=$?
  cat "$log.sanitizer" >> "$log" 2>/dev/null && rm -f "$log.sanitizer"
  local summary
  summary=$(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$log" | tail -1)
  [ $rc -eq 124 ] && summary="timed out after ${limit} s; $summary"
  printf '%-10s %-48s rc %-3s %6s s  %s\n' "$tool" "$name" "$rc" $((SECONDS - t0)) "${summary:-no summary line}" |
    tee -a "$out/summary.txt"
  [ $rc -eq 0 ] || status=1
}

# The tests of a binary that the filter selects, one Suite.Name per line.
list_tests() {  # list_tests BINARY FILTER
  "$1" --gtest_list_tests ${2:+--gtest_filter="$2"} 2>/dev/null | awk '
    /^[^ ]/ { suite = $1; next }
    /^  [^ ]/ { print suite $1 }'
}

# Tests a tool must not run: the out-of-memory test makes cudaMalloc fail on purpose, which
# memcheck reports as an API error (the test checks our message for that failure).
skip_for() {
  case $1 in memcheck) echo 'CudaCore.OutOfMemoryIsAClearError' ;; esac
}

jobs=${SANITIZE_JOBS:-1}
run_tool() {  # run_tool TOOL: every test binary and, for memcheck/initcheck, biofm train
  local tool=$1 b t filter skip
  for b in "${binaries[@]}"; do
    filter=${GTEST_FILTER:-}
    skip=$(skip_for "$tool")
    if [ -n "$skip" ]; then
      case $filter in *-*) filter="$filter:$skip" ;; *) filter="${filter:-*}-$skip" ;; esac
    fi
    if [ "$jobs" -le 1 ]; then
      run_one "$tool" "$(basename "$b")" "$b" --gtest_filter="$filter"
      continue
    fi
    # One process per test, SANITIZE_JOBS at a time: a slow test costs only itself, and the
    # summary says which test each report came from.
    while IFS= read -r t; do
      while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
      run_one "$tool" "$t" "$b" --gtest_filter="$t" &
    done < <(list_tests "$b" "$filter")
    wait
  done
  if [ -x "$biofm" ] && { [ "$tool" = memcheck ] || [ "$tool" = initcheck ]; }; then
    run_dir=$(mktemp -d)
    run_one "$tool" biofm_train_esm2 "$biofm" train --config-dir "$root/configs" --config-name esm2_sanity device=cuda \
      num_train_steps=4 dataset.path="$root/data/proteins_sample.fasta" dataset.val_path=null dataset.val_every_n_steps=0 \
      checkpoint.save_every_n_steps=2 output_dir="$run_dir/esm2" logger.tensorboard=false
    run_one "$tool" biofm_train_llama "$biofm" train --config-dir "$root/configs" --config-name llama3_sanity device=cuda \
      num_train_steps=4 dataset.path="$root/data/dna_sample.fasta" dataset.val_path=null dataset.val_every_n_steps=0 \
      checkpoint.save_every_n_steps=2 output_dir="$run_dir/llama" logger.tensorboard=false
    rm -rf "$run_dir"
  fi
}

for tool in $tools; do
  case $tool in memcheck | racecheck | initcheck | synccheck) ;; *)
    echo "gpu_sanitize: unknown tool '$tool'" >&2
    exit 2
    ;;
  esac
done
if [ "${SANITIZE_PARALLEL_TOOLS:-0}" = 1 ]; then
  for tool in $tools; do run_tool "$tool" & done
  wait
else
  for tool in $tools; do run_tool "$tool"; done
fi
# (runs in the background cannot set status: read it back from the summary)
grep -qv ' rc 0 ' "$out/summary.txt" && status=1
echo "logs: $out"
exit $status
