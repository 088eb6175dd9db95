// The padded [B,S] batch of a Hugging Face fixture (tools/make_hf_fixtures.py) as our Batch:
// BSHD (padding slots kept) or packed THD (padding removed). Causal fixtures hold HF's
// unshifted labels (HF shifts inside its loss); with shift_labels ours become the target of
// each position: label at t = HF label at t+1, -100 at each sequence's last real token.
// row_of maps (b, s) to the row in our layout (-1: dropped).
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "biofm/core/error.h"
#include "biofm/data/batch.h"
#include "biofm/io/safetensors.h"
#include "testing.h"  // max_abs, shared with the other tests

namespace biofm::testkit {

inline Batch hf_fixture_batch(const SafetensorsFile& ref, bool packed, bool shift_labels,
                              std::vector<int64_t>& row_of) {
  const Tensor& ids = ref.get("input_ids");
  const Tensor& mask = ref.get("attention_mask");
  const Tensor& labels = ref.get("labels");
  const int64_t B = ids.size(0), S = ids.size(1);
  std::vector<int32_t> out_ids, out_labels, out_pos, cu{0}, lens;
  row_of.assign(size_t(B * S), -1);
  int32_t maxlen = 0;
  for (int64_t b = 0; b < B; ++b) {
    int32_t len = 0;
    for (int64_t s = 0; s < S; ++s) len += mask.i32()[b * S + s];
    lens.push_back(len);
    maxlen = std::max(maxlen, len);
    const int64_t slots = packed ? len : S;
    for (int64_t s = 0; s < slots; ++s) {
      row_of[size_t(b * S + s)] = int64_t(out_ids.size());
      out_ids.push_back(ids.i32()[b * S + s]);
      int32_t y = -100;
      if (shift_labels && s + 1 < len) y = labels.i32()[b * S + s + 1];
      if (!shift_labels && s < len) y = labels.i32()[b * S + s];
      out_labels.push_back(y);
      out_pos.push_back(s < len ? int32_t(s) : 0);
    }
    cu.push_back(int32_t(out_ids.size()));
  }
  Batch batch;
  const int64_t T = int64_t(out_ids.size());
  batch.input_ids = Tensor::from_i32({T}, out_ids);
  batch.labels = Tensor::from_i32({T}, out_labels);
  batch.positions = Tensor::from_i32({T}, out_pos);
  batch.cu_seqlens = Tensor::from_i32({B + 1}, cu);
  batch.seq_lens = Tensor::from_i32({B}, lens);
  batch.max_seqlen = maxlen;
  for (int32_t l : lens) batch.num_real_tokens += l;
  for (int32_t y : out_labels) batch.num_label_tokens += y != -100;
  return batch;
}

// The rows of our gradient `full` (F32, CPU) that a fixture gradient `ref` holds: all of them,
// or every k-th row when the fixture keeps a large gradient as rows 0, k, 2k, ... (to stay
// small; tools/make_hf_fixtures.py). Any other shape mismatch is an error.
inline Tensor fixture_rows(const Tensor& full, const Tensor& ref, const std::string& what) {
  if (full.shape() == ref.shape()) return full;
  if (full.dim() != 2 || ref.dim() != 2 || ref.size(1) != full.size(1) || ref.size(0) == 0 ||
      full.size(0) % ref.size(0) != 0)
    fail(what, ": fixture gradient ", ref.describe(), " does not match ", full.describe());
  const int64_t stride = full.size(0) / ref.size(0), C = full.size(1);
  Tensor rows = Tensor::empty(ref.shape(), DType::F32);
  for (int64_t r = 0; r < ref.size(0); ++r)
    std::copy(full.f32() + r * stride * C, full.f32() + (r * stride + 1) * C, rows.f32() + r * C);
  return rows;
}

}  // namespace biofm::testkit
