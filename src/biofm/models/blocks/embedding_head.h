// The ends of a language model: the token embedding (optionally with ESM-2's token-dropout
// rescaling, learned absolute positions and a LayerNorm, as BERT) and the LM head (an optional
// dense → GELU → LayerNorm transform, then the decoder: the embedding matrix when tied, with
// an optional bias).
#pragma once
#include "biofm/data/batch.h"
#include "biofm/models/blocks/linear.h"
#include "biofm/models/blocks/norm.h"

namespace biofm {

class TokenEmbedding {
 public:
  TokenEmbedding() = default;
  // esm_rescale: ESM-2's token dropout (mask_token_id >= 0: <mask> rows zeroed and every
  // sequence rescaled by (1 - 0.12)/(1 - its mask ratio); -1: only padding rows zeroed, as
  // Hugging Face multiplies by the attention mask).
  // positions: a [max_positions, H] table added by each token's position in its sequence
  // (undefined: none, positions are rotary); norm: applied to the sum (has_norm).
  TokenEmbedding(const BlockContext* ctx, ParamRef table, bool esm_rescale, int32_t mask_token_id,
                 ParamRef positions = ParamRef(), Norm norm = Norm(), bool has_norm = false)
      : ctx_(ctx), table_(table), positions_(positions), norm_(norm), esm_rescale_(esm_rescale),
        has_norm_(has_norm), mask_token_id_(mask_token_id) {}

  // x [T, H]. Keeps in `a` what backward needs (row_scale: the per-row factor of ESM rescaling).
  struct Acts {
    Tensor row_scale, sum;  // sum: the norm's input (has_norm)
    NormStats norm;
  };
  Tensor forward(const Batch& b, Acts& a) const;
  // Accumulates the tables' (and norm's) gradients from dx (dx is changed in place).
  void backward(Tensor& dx, const Batch& b, const Acts& a) const;

 private:
  const BlockContext* ctx_ = nullptr;
  ParamRef table_, positions_;
  Norm norm_;
  bool esm_rescale_ = false, has_norm_ = false;
  int32_t mask_token_id_ = -1;
};

struct HeadActs {
  Tensor dense, act, out;  // transform only
  NormStats norm;
};

class LmHead {
 public:
  LmHead() = default;
  // transform_dense / transform_norm undefined: the decoder reads the hidden states directly.
  LmHead(const BlockContext* ctx, Linear transform_dense, Norm transform_norm, Linear decoder, bool has_transform)
      : ctx_(ctx), dense_(std::move(transform_dense)), norm_(transform_norm), decoder_(std::move(decoder)),
        has_transform_(has_transform) {}

  // logits [T, V] in the activation dtype.
  Tensor forward(const Tensor& h, HeadActs& a) const;
  // dh overwritten from dlogits; parameter gradients accumulate.
  void backward(Tensor& dh, const Tensor& dlogits, const Tensor& h, HeadActs& a) const;

 private:
  const BlockContext* ctx_ = nullptr;
  Linear dense_;
  Norm norm_;
  Linear decoder_;
  bool has_transform_ = false;
};

}  // namespace biofm
