#!/usr/bin/env bash
# Session 12 device command K: embed over two processes (biofm launch) on the GPU against one
# process: the same shards, bit for bit.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
python3 - <<'PY'
import torch, transformers
cfg = transformers.EsmConfig(vocab_size=33, hidden_size=320, num_hidden_layers=6, num_attention_heads=20,
    intermediate_size=1280, max_position_embeddings=1026, position_embedding_type="rotary", token_dropout=True,
    pad_token_id=1, mask_token_id=32, emb_layer_norm_before=False,
    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
torch.manual_seed(0)
transformers.EsmForMaskedLM(cfg).save_pretrained("/tmp/esm8m")
PY
zcat .carry/data/uniprot_20k.fasta.gz | head -40000 > /tmp/in.fasta
C="embed --model /tmp/esm8m --input /tmp/in.fasta --device cuda --shard-size 1000"
build/biofm $C --output /tmp/one > $OUT/one.log 2>&1; echo "one rc $? $(tail -1 $OUT/one.log)" >> $S
build/biofm launch --nproc-per-node 2 $C --output /tmp/two > $OUT/two.log 2>&1; echo "launch rc $?" >> $S
grep "rank" $OUT/two.log | cut -c1-200 >> $S
python3 - >> $S <<'PY'
import json, safetensors.torch as st, torch
a = json.load(open("/tmp/one/index.json")); b = json.load(open("/tmp/two/index.json"))
same = a["shards"] == b["shards"]
diff = 0
for s in a["shards"]:
    x = st.load_file("/tmp/one/" + s["file"]); y = st.load_file("/tmp/two/" + s["file"])
    for k in x:
        diff += int(not torch.equal(x[k], y[k]))
print(f"shards listed equal: {same}; {len(a['shards'])} shards; tensors that differ: {diff}; summary two: {b['summary']}")
PY
cat $S
