#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (one after another, one core) on a corpus seeded from
# the bundled data, and prints one line per target: executions, seconds, corpus size, result.
#   fuzz/run_all.sh SECONDS [BUILD_DIR]      (BUILD_DIR default: build-fuzz)
# FUZZ_TARGETS="t1 t2" runs only those targets; FUZZ_RUNS=N stops a target after N executions
# (or SECONDS, whichever comes first). On a machine with cores to spare: FUZZ_FORK=N runs N
# processes per target (libFuzzer -fork, sharing the corpus), FUZZ_PARALLEL=1 runs the targets
# at the same time; FUZZ_FORK_<target>=N sets one target's count (e.g. FUZZ_FORK_fuzz_yaml_config=14
# gives the slowest target more cores). Long campaigns: docs/HARDENING.md.
# The build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DBIOFM_CUDA=OFF \
#              -DBIOFM_TESTS=OFF -DBIOFM_FUZZ=ON && cmake --build build-fuzz --target fuzz_all
# Corpora grow in BUILD_DIR/fuzz-corpus/<target> (kept between runs), crash inputs land in
# BUILD_DIR/fuzz-crashes/<target>/ and logs in BUILD_DIR/fuzz-logs/. Exit status 1 if any
# target found a crash, leak, timeout (30 s, confirmed by a re-run) or out-of-memory input.
set -uo pipefail
secs=${1:?usage: fuzz/run_all.sh SECONDS [BUILD_DIR]}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${2:-$root/build-fuzz}" && pwd)
targets=${FUZZ_TARGETS:-fuzz_reader fuzz_yaml_config fuzz_hf_config fuzz_safetensors fuzz_checkpoint_manifest fuzz_tokenizer fuzz_prepared_shard fuzz_cluster_index}
runs=${FUZZ_RUNS:--1} fork=${FUZZ_FORK:-0} parallel=${FUZZ_PARALLEL:-0}
corpus=$build/fuzz-corpus seeds=$build/fuzz-seeds logs=$build/fuzz-logs crashes=$build/fuzz-crashes
mkdir -p "$corpus" "$logs" "$crashes"
rm -rf "$seeds"

# ---- seeds from the bundled data (first 4 KiB of each file) ----
seed() {  # seed TARGET NAME [PREFIX_BYTE_OCTAL] < content
  mkdir -p "$seeds/$1"
  { [ -n "${3:-}" ] && printf "\\$3"; head -c 4096; } > "$seeds/$1/$2"
}
i=0
for f in "$root"/data/*.fasta "$root"/data/bad/*; do
  i=$((i + 1))
  case "$f" in
    *.csv) p=001 ;; *.jsonl) p=002 ;; *.txt) p=003 ;; *) p=000 ;;
  esac
  seed fuzz_reader "s$i" $p < "$f"
  seed fuzz_reader "n$i" $(printf '%03o' $((8#$p | 4))) < "$f"   # with a name column
  seed fuzz_tokenizer "s$i" < "$f"
done
printf 'id,name,sequence\n1,a,MKT\n2,"b,c",ACGT\n' | seed fuzz_reader csv 005
printf '{"name": "a", "sequence": "MKT"}\n{"name": "caf\xe9", "sequence": "AC"}\n' | seed fuzz_reader jsonl 006
printf '>caf\xe9 x\nMKTAYIAK*\n>\xff\xfe\nACGT\n' | seed fuzz_reader latin1 000
# Compressed inputs (the readers detect gzip and zstd by their magic bytes, whatever the name).
head -c 3000 "$root/data/proteins_val.fasta" | gzip -c | seed fuzz_reader gzip 000
if command -v zstd > /dev/null; then head -c 3000 "$root/data/proteins_val.fasta" | zstd -q -c | seed fuzz_reader zstd 000; fi
i=0
for f in "$root"/configs/*.yaml; do i=$((i + 1)); seed fuzz_yaml_config "c$i" < "$f"; done
printf 'seed: 3\noptimizer: {lr: 1e-3, betas: [0.9, 0.95]}\n---overrides---\nmodel.config.hidden_size=64\n~recompute\n+device=cuda\n' |
  seed fuzz_yaml_config overrides
i=0
while IFS= read -r f; do i=$((i + 1)); seed fuzz_hf_config "j$i" < "$f"; done < <(find "$root/tests/fixtures" -name 'config*.json')
printf '{"format": "biofm-checkpoint-v1", "step": 3, "files": {"model.safetensors": {"bytes": 1234, "crc32": 305419896}, "config.yaml": {"bytes": 9, "crc32": 1}}}' |
  seed fuzz_checkpoint_manifest manifest
printf '{"step": 7, "data_cursor": 70, "seed": 42, "epoch": 0}' | seed fuzz_checkpoint_manifest state
st() {  # st NAME HEADER PAYLOAD_BYTES: a safetensors file
  local h=$2 n=${#2}
  printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $((n & 255)) $((n >> 8 & 255)) $((n >> 16 & 255)) $((n >> 24 & 255)))\\000\\000\\000\\000%s" "$h" |
    { cat; head -c "$3" /dev/urandom; } | seed fuzz_safetensors "$1"
}
st mixed '{"__metadata__": {"format": "pt"}, "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "BF16", "shape": [2, 1], "data_offsets": [8, 12]}, "h": {"dtype": "F16", "shape": [1], "data_offsets": [12, 14]}}' 14
st empty '{"e": {"dtype": "F32", "shape": [0, 4], "data_offsets": [0, 0]}, "i": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}' 8
while IFS= read -r f; do seed fuzz_safetensors "$(basename "$(dirname "$f")")_$(basename "$f")" < "$f"; done \
  < <(find "$root/tests/fixtures" -name '*.safetensors' -size -64k)
# A prepared shard (data/shard.h): header, offsets [0, 3, 5], tokens 5 6 7 8 9.
{ printf 'BIOFMSH1\001\000\000\000\100\000\000\000'
  for v in 2 5 64 88; do printf "\\$(printf '%03o' $v)\000\000\000\000\000\000\000"; done
  head -c 16 /dev/zero
  for v in 0 3 5; do printf "\\$(printf '%03o' $v)\000\000\000\000\000\000\000"; done
  printf '\005\006\007\010\011'; } | seed fuzz_prepared_shard two_records
# A cluster index (data/clusters.h): 2 clusters, 3 members; offsets [0, 2, 3], members [0, 1, 2].
u64() { for v in "$@"; do printf "\\$(printf '%03o' $v)\000\000\000\000\000\000\000"; done; }
{ printf 'BIOFMCL1'; u64 2 3 0 2 3 0 1 2; } | seed fuzz_cluster_index two_clusters

# Inputs that once crashed a target (fuzz/regression/<target>/) stay in its seeds.
for d in "$root"/fuzz/regression/*/; do
  [ -d "$d" ] || continue
  t=$(basename "$d")
  mkdir -p "$seeds/$t"
  cp "$d"* "$seeds/$t/" 2>/dev/null || true
done

# ---- run ----
# One target: its summary line on stdout, exit status 1 on a finding.
run_target() {
  local t=$1 log=$logs/$1.log rc result unit execs took rss mode=() per=FUZZ_FORK_$1
  local n=${!per:-$fork}
  mkdir -p "$corpus/$t" "$crashes/$t"
  [ "$n" -gt 0 ] && mode=(-fork="$n") || mode=(-runs="$runs")
  "$build/fuzz/$t" "$corpus/$t" "$seeds/$t" -max_total_time="$secs" "${mode[@]}" -max_len=8192 -timeout=30 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$crashes/$t/" > "$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  # (fork mode prints no final stats: the executions are the last status line's count)
  [ -n "$execs" ] || execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  took=$(grep -oE 'Done [0-9]+ runs in [0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
  rss=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  [ -n "$rss" ] || rss=$(grep -oE 'rss: [0-9]+Mb' "$log" | grep -oE '[0-9]+' | sort -n | tail -1)
  result=ok
  if [ $rc -ne 0 ]; then
    result="FAILED (rc $rc, see $log and $crashes/$t/)"
    # On a loaded machine a stall can look like a hang: re-run a timeout input once, alone.
    unit=$(grep -o 'Test unit written to .*' "$log" | tail -1 | sed 's/Test unit written to //')
    case "$(basename "${unit:-x}")" in
      timeout-*)
        if timeout 120 "$build/fuzz/$t" -timeout=30 "$unit" > "$log.rerun" 2>&1; then
          result="ok (a timeout that did not reproduce when re-run: $unit)"
        fi ;;
    esac
  fi
  printf '%-26s %12s %8s %8s %8s  %s\n' "$t" "${execs:-0}" "${took:-$secs}" "$(ls "$corpus/$t" | wc -l)" "${rss:-?}" "$result"
  case "$result" in ok*) return 0 ;; *) return 1 ;; esac
}

status=0
printf '%-26s %12s %8s %8s %8s  %s\n' target executions seconds corpus peak_MB result
if [ "$parallel" = 1 ]; then
  for t in $targets; do run_target "$t" > "$logs/$t.summary" & done
  for t in $targets; do wait -n || status=1; done
  for t in $targets; do cat "$logs/$t.summary"; done
else
  for t in $targets; do run_target "$t" || status=1; done
fi
exit $status
