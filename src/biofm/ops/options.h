// Runtime options of the ops (the `ops.*` config keys and their CLI flags; benchmarks set them
// from their own flags). Plain values, read by the ops on each call: set them once at start-up,
// before the first op runs (the GEMM and cuDNN plan caches keep what was chosen when a shape
// was first seen).
#pragma once
#include <string_view>

namespace biofm::ops {

// Which CUDA attention implementation runs (ops.attention).
enum class AttentionBackend {
  Auto,      // cuDNN's fused SDPA where it takes the shape, the CUDA fallback kernels otherwise
  Cudnn,     // cuDNN only: a shape it cannot take is an error instead of a fallback
  Fallback,  // the CUDA fallback kernels only
};

struct OpOptions {
  AttentionBackend attention = AttentionBackend::Auto;  // ops.attention
  bool attention_verbose = false;  // ops.attention_verbose: print once per shape which path ran
  // ops.attention_check: copy cu_seqlens/seq_lens to the host on every call and check them
  // (synchronises the stream; for debugging).
  bool attention_check = false;
  // ops.sdpa_autotune: time every cuDNN SDPA engine configuration on a graph's first execution
  // instead of taking the heuristic's first choice (costs build time per graph shape).
  bool sdpa_autotune = false;
  // ops.attention_packed_qkv: attention reads q, k, v in place from the fused QKV projection's
  // output (rope applied there in place; cuDNN through strides) instead of unpacking them into
  // separate tensors first.
  bool attention_packed_qkv = true;
  // ops.sdpa_dense: batches whose sequences all have the same power-of-two length
  // (AttentionShape.uniform: full training windows) run cuDNN's dense SDPA graph of their exact
  // shape instead of the ragged one.
  bool sdpa_dense = true;
  // ops.gemm_fused_bgrad: the bias gradient from cuBLASLt's BGRADB epilogue where it applies
  // (false: the deterministic column-sum kernel, which measured faster end to end on H100).
  bool gemm_fused_bgrad = false;
  // ops.gemm_inplace_splitk: restrict split-K algorithms to in-place reduction (an experiment;
  // it may make the heuristic pick slower kernels).
  bool gemm_inplace_splitk = false;
  // ops.gemm_fused_gelu: the ESM-2 MLP's first GEMM and its exact GELU in one CUTLASS kernel,
  // and the GELU backward inside the second GEMM's input-gradient GEMM (bf16 on Hopper;
  // false: cuBLASLt GEMMs and separate GELU kernels).
  bool gemm_fused_gelu = true;
  // ops.gemm_autotune: time cuBLASLt's heuristic candidates on a GEMM shape's first call and keep
  // the fastest (shared by shapes within 1024 of each other in every dimension). Off by default,
  // on in the ESM-2 650M config: on H100 it gains 650M 1-2% but costs ESM-2 150M and Llama 1B
  // about 5% (a candidate timed alone is not always the fastest inside a step). The choices go
  // into checkpoints and a resumed run takes them (ops/gemm/tuning.h).
  bool gemm_autotune = false;
  // ops.wgrad_stream: in a training step's backward (CUDA), each transformer layer's weight and
  // bias gradients run on a second stream beside the chain of input gradients, filling the SMs
  // and memory-bound gaps that chain leaves (core/side_stream.h). Same results (the gradients
  // within the run-to-run spread of atomics elsewhere in backward). On H100: ESM-2 650M bf16
  // +2%; Llama 1B -0.5 to -1.2% (off in the Llama configs).
  bool wgrad_stream = true;
  // ops.fp8_release_inputs: an FP8 layer whose forward kept its input's codes for backward
  // (Fp8SavedInput::replaces_x) drops the bf16 input itself (the norms' outputs, the MLP's
  // activation), as Transformer Engine keeps only FP8 copies; false keeps them too (except the
  // ESM-2 GELU activation under DelayedScaling, never stored: fp8_gelu_codes).
  bool fp8_release_inputs = true;
  // ops.fp8_gelu_codes: under FP8 DelayedScaling (CUDA), the ESM-2 MLP's GELU and its gradient
  // are computed inside the quantization of the next GEMM's operand (ops::fp8_quantize_gelu), so
  // that neither is stored in bf16; false runs the GELU kernels and then the quantization. The
  // results are the same bit for bit wherever cuBLASLt has the FP8 GEMMs (should it refuse one,
  // its bf16 fallback reads the decoded codes instead of the bf16 tensor).
  bool fp8_gelu_codes = true;
  // ops.fp8_norm_codes: under FP8 DelayedScaling (CUDA, with fp8_release_inputs), the norms in
  // front of the q|k|v projection and the MLP write that GEMM's FP8 codes themselves
  // (ops::layernorm_forward_fp8 / rmsnorm_forward_fp8), so their bf16 outputs are never stored;
  // false runs the norm kernels and then the quantization. The results are the same bit for bit
  // wherever cuBLASLt has the FP8 GEMMs (should it refuse one, its bf16 fallback reads the decoded
  // codes instead of the bf16 tensor).
  bool fp8_norm_codes = true;
  // ops.fp8_weights_ahead: in a training forward (CUDA, FP8 current or delayed scaling, the
  // weights resident: not fsdp), each layer's weight codes (made once per optimizer step) are
  // made on the side stream while the layer before it runs (core/side_stream.h), instead of on
  // the compute stream in front of the layer's first GEMM. The same codes.
  bool fp8_weights_ahead = true;
  // Chunks of 8 features each thread of the norm kernels caches (1, 2, 4 or 8; backward at most
  // 4; 0 = the measured automatic choice). No config key: for bench/norm_bench.cpp.
  int norm_chunks = 0;
  // The fused GELU GEMMs' (CUTLASS) persistent tile order: swizzle width (1, 2, 4, 8; 0 = the
  // default) and raster (0 = CUTLASS's heuristic, 1 = along M, 2 = along N). No config key: for
  // bench/mlp_gelu_bench.cpp.
  int gemm_fused_swizzle = 0;
  int gemm_fused_raster = 0;
};

void set_op_options(const OpOptions& options);
const OpOptions& op_options();

// "auto" | "cudnn" | "fallback"; anything else throws, naming the accepted values.
AttentionBackend parse_attention_backend(std::string_view name);
const char* attention_backend_name(AttentionBackend b);

}  // namespace biofm::ops
