// Tiny models of every registered family and batches of the bundled data they train on.
#pragma once
#include <string>

#include "biofm/data/dataset.h"
#include "biofm/models/esm2/config.h"
#include "biofm/models/registry.h"

namespace biofm::testkit {

inline ModelShape tiny_shape(const ModelFamily& f, int layers = 2) {
  ModelShape m;
  m.hidden_size = 32;
  m.num_hidden_layers = layers;
  m.num_attention_heads = 4;
  m.intermediate_size = 64;
  if (f.objective == Objective::CausalLM) {  // the DNA Llama shape: GQA, SwiGLU, untied head
    m.vocab_size = 256;
    m.num_key_value_heads = 2;
    m.hidden_act = "silu";
    m.tie_word_embeddings = false;
  }
  return m;
}

// tiny_shape's ESM-2, for tests that build the model class directly.
inline Esm2Config tiny_esm2_config() {
  Esm2Config c;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 64;
  return c;
}

// The bundled sample the family's objective trains on.
inline SequenceDataset bundled_data(const ModelFamily& f) {
  const std::string name = f.objective == Objective::MaskedLM ? "proteins_sample.fasta" : "dna_sample.fasta";
  return SequenceDataset::load(std::string(BIOFM_SOURCE_DIR) + "/data/" + name, ReaderOptions{});
}

// Small batches: 64-token sequences (windows of stride 16), 256 tokens per batch.
inline DataOptions small_batches() {
  DataOptions d;
  d.max_seq_length = 64;
  d.stride = 16;
  d.max_tokens_per_batch = 256;
  return d;
}

}  // namespace biofm::testkit
