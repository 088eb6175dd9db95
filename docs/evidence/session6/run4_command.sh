# Session 6, run 3b (same machine): CUDA test suite (incl. new inference, delayed-scaling and block-scaled tests), cuBLASLt block-scaling probe, FP8 recipe bench, embed vs HF.
mkdir -p /tmp/b build/tests && [ -x /tmp/b/biofm ] || { xz -dc .carry/pack/biofm.xz > /tmp/b/biofm && chmod +x /tmp/b/biofm; }
cp /tmp/b/biofm build/biofm && xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export CUDA_VISIBLE_DEVICES=0
timeout 200 build/tests/biofm_cuda_tests > $OUT/cuda_tests.txt 2>&1; echo "cuda tests exit $?"; grep -E "^\[  (PASSED|FAILED) |tests ran|FAILED" $OUT/cuda_tests.txt | head -20
nvcc -std=c++17 -O2 -arch=sm_90a bench/fp8_blockscale_probe.cu -lcublasLt -o /tmp/probe > $OUT/probe.txt 2>&1 && timeout 30 /tmp/probe >> $OUT/probe.txt 2>&1; tail -15 $OUT/probe.txt
common="--model esm2 --shape 650M --data .carry/pack/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --max-seq-length 1024"
for v in "bf16|" "fp8_current|--fp8" "fp8_delayed|--fp8 fp8_config.fp8_recipe=DelayedScaling"; do IFS='|' read -r n a <<< "$v"; timeout 90 build/biofm bench $common $a --json $OUT/bench_$n.json > $OUT/bench_$n.txt 2>&1; echo "$n: $(tail -1 $OUT/bench_$n.txt | cut -c1-200)"; done
zcat .carry/pack/data/uniprot_20k.fasta.gz > /tmp/uniprot.fasta
timeout 240 bash bench/embed_vs_hf.sh build/biofm --data /tmp/uniprot.fasta --records 4000 --out /tmp/evh > $OUT/embed_vs_hf.txt 2>&1; echo "embed_vs_hf exit $?"; tail -15 $OUT/embed_vs_hf.txt
