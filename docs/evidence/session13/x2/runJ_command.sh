# Session 13 run J (nvidia-h200-x2), bench/nccl_overlap_probe.cu built as in its header:
mkdir -p $OUT; export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/local/cuda/lib:$LD_LIBRARY_PATH
timeout 150 .carry/pack/nccl_overlap_probe 33 79 60 2>&1 | tee $OUT/nccl_overlap_probe.txt
NCCL_DEBUG=INFO timeout 60 .carry/pack/nccl_overlap_probe 4 79 10 2>&1 | grep -i "symmetric\|window\|CTA\|cumem\|NCCL version"
