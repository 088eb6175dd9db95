#!/usr/bin/env bash
# Session 30 device command B (one H200): the Hugging Face exports of 0270e08 checked with
# transformers itself (the Llama config.json now also carries transformers 4.x's rope_theta /
# rope_scaling / torch_dtype beside rope_parameters; ESM's also carries dtype): a 2-step
# fine-tune of each tiny fixture on the GPU, exported, then loaded by AutoModel and compared
# with biofm's logits and hidden states (tools/check_hf_export.py, tools/check_llama_export.py).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name --format=csv,noheader; python3 -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)"; } > $S 2>&1
R=/tmp/runs; mkdir -p $R
build/biofm train --config-name llama3_sanity model.init_from=tests/fixtures/llama_tiny num_train_steps=2 device=cuda \
  output_dir=$R/llama dataset.max_seq_length=256 dataset.max_tokens_per_batch=1024 dataset.val_path=null dataset.val_every_n_steps=0 > $OUT/train_llama.log 2>&1
echo "train llama rc $?" >> $S
grep -E "^note|rope" $OUT/train_llama.log | head -5 >> $S
cp $R/llama/final_model/config.json $OUT/llama_config.json 2>/dev/null
python3 tools/check_llama_export.py --model $R/llama/final_model --fasta data/dna_val.fasta --biofm build/biofm \
  --max-seq-length 256 --stride 64 > $OUT/check_llama.log 2>&1
echo "check_llama_export rc $?" >> $S; tail -6 $OUT/check_llama.log >> $S
python3 - >> $S 2>&1 <<PY
from transformers import AutoConfig
c = AutoConfig.from_pretrained("$R/llama/final_model", local_files_only=True)
print("transformers reads rope_parameters:", getattr(c, "rope_parameters", None), "dtype:", getattr(c, "dtype", None))
PY
build/biofm train --config-name esm2_sanity model.init_from=tests/fixtures/esm2_tiny num_train_steps=2 device=cuda \
  output_dir=$R/esm dataset.val_path=null dataset.val_every_n_steps=0 > $OUT/train_esm.log 2>&1
echo "train esm rc $?" >> $S
head -c 300 data/proteins_val.fasta > /dev/null
build/biofm embed --model $R/esm/final_model --input data/proteins_val.fasta --output /tmp/ours.safetensors --per-token --logits --device cpu > $OUT/embed_esm.log 2>&1
echo "embed rc $?" >> $S
python3 tools/check_hf_export.py --model $R/esm/final_model --ours /tmp/ours.safetensors --fasta data/proteins_val.fasta > $OUT/check_esm.log 2>&1
echo "check_hf_export rc $?" >> $S; tail -6 $OUT/check_esm.log >> $S
cat $S
