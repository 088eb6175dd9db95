#!/usr/bin/env bash
# Session 17 device command A (H100): the backend-ops harness with every shipped model's widths,
# a worst-element bound and a second GPU run that must give the same bits; then the whole CUDA
# suite; then a kernel profile (nsys) of `biofm embed` (ESM-2 650M shape, 4,000 proteins, bf16).
set -u
mkdir -p build/tests $OUT /tmp/e
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; which nsys ncu; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 200 build/tests/biofm_cuda_tests --gtest_filter="BackendOps.*" > $OUT/backend_ops.log 2>&1
echo "backend ops rc $?" >> $S
grep -E "backend ops:|^\[  PASSED|^\[  FAILED" $OUT/backend_ops.log >> $S
grep -E "Failure|differ|bound" $OUT/backend_ops.log | head -80 >> $S
timeout 300 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*:BackendOps.*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
gzip $OUT/cuda_tests.log
python3 - <<'PY' > $OUT/make_model.log 2>&1
import gzip, transformers, torch
cfg = transformers.EsmConfig(vocab_size=33, hidden_size=1280, num_hidden_layers=33, num_attention_heads=20,
    intermediate_size=5120, max_position_embeddings=1026, position_embedding_type="rotary", token_dropout=True,
    mask_token_id=32, pad_token_id=1, layer_norm_eps=1e-5, emb_layer_norm_before=False)
torch.manual_seed(0)
transformers.EsmForMaskedLM(cfg).save_pretrained("/tmp/e/esm2_650M")
n = 0
with gzip.open(".carry/data/uniprot_20k.fasta.gz", "rt") as f, open("/tmp/e/in.fasta", "w") as o:
    for line in f:
        if line.startswith(">"):
            n += 1
            if n > 4000: break
        o.write(line)
PY
echo "model rc $?" >> $S
E="embed --model /tmp/e/esm2_650M --device cuda --max-tokens 16384 --input /tmp/e/in.fasta --output /tmp/e/o.safetensors"
build/biofm $E >> $S 2>&1
if which nsys > /dev/null 2>&1; then
  nsys profile -o /tmp/e/prof --force-overwrite true build/biofm $E > $OUT/nsys.log 2>&1
  echo "nsys rc $?" >> $S
  nsys stats --report cuda_gpu_kern_sum --format csv /tmp/e/prof.nsys-rep > $OUT/embed_kernels.csv 2>> $OUT/nsys.log
  nsys stats --report cuda_api_sum --format csv /tmp/e/prof.nsys-rep > $OUT/embed_api.csv 2>> $OUT/nsys.log
  head -30 $OUT/embed_kernels.csv | cut -c1-220 >> $S
fi
cat $S
