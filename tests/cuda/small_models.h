// Small ESM-2 and Llama models (3 layers) and real batches for the CUDA model-level tests: an
// ESM-2 with GELU MLPs and biases, a Llama with SwiGLU and grouped-query attention. Wider than
// the CPU tests' tiny models (tests/models/tiny_models.h): FP8 GEMMs need features in multiples
// of 16, and the GPU attention paths want real head dims (64).
#pragma once
#include <string>
#include <vector>

#include "biofm/data/causal.h"
#include "biofm/data/dataset.h"
#include "biofm/data/mlm.h"
#include "biofm/models/esm2/model.h"
#include "biofm/models/llama/model.h"

namespace biofm::cudatest {

inline Esm2Config small_esm2_config() {
  Esm2Config c;
  c.hidden_size = 256;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 4;
  c.intermediate_size = 1024;
  return c;
}

inline LlamaConfig small_llama_config() {
  LlamaConfig c;
  c.vocab_size = 256;
  c.hidden_size = 128;
  c.intermediate_size = 512;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.max_position_embeddings = 1024;
  return c;
}

// The first `count` masked-LM batches of data/proteins_sample.fasta (sequences up to 256 tokens,
// 4,096 tokens per batch), on the GPU.
inline std::vector<Batch> protein_batches(int count) {
  ReaderOptions ro;
  SequenceDataset proteins =
      SequenceDataset::load(std::string(BIOFM_SOURCE_DIR) + "/data/proteins_sample.fasta", ro);
  MlmOptions mo;
  mo.max_seq_length = 256;
  mo.max_tokens_per_batch = 4096;
  MlmBatcher mlm(proteins, mo);
  std::vector<Batch> out;
  for (int i = 0; i < count; ++i) out.push_back(mlm.next().to(Device::CUDA));
  return out;
}

// The first `count` causal-LM batches of data/dna_sample.fasta (1,024-token windows, 4,096
// tokens per batch), on the GPU.
inline std::vector<Batch> dna_batches(int count) {
  ReaderOptions ro;
  SequenceDataset dna = SequenceDataset::load(std::string(BIOFM_SOURCE_DIR) + "/data/dna_sample.fasta", ro);
  CausalLmOptions co;
  co.max_seq_length = 1024;
  co.max_tokens_per_batch = 4096;
  CausalLmBatcher clm(dna, co);
  std::vector<Batch> out;
  for (int i = 0; i < count; ++i) out.push_back(clm.next().to(Device::CUDA));
  return out;
}

}  // namespace biofm::cudatest
