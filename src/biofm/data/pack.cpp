#include "biofm/data/pack.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "biofm/core/error.h"

namespace biofm {

BatchMode parse_batch_mode(std::string_view name) {
  std::string n(name);
  for (char& c : n) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (n == "thd") return BatchMode::Thd;
  if (n == "bshd") return BatchMode::Bshd;
  fail("unknown batch mode '", name, "' (expected thd or bshd)");
}

const char* batch_mode_name(BatchMode m) { return m == BatchMode::Thd ? "thd" : "bshd"; }

void BatchBuilder::clear() {
  ids_.clear();
  labels_.clear();
  lens_.clear();
}

void BatchBuilder::add(const int32_t* ids, const int32_t* labels, int64_t n) {
  BIOFM_CHECK(n > 0 && n < (int64_t(1) << 31), "sequence length ", n);
  ids_.insert(ids_.end(), ids, ids + n);
  labels_.insert(labels_.end(), labels, labels + n);
  lens_.push_back(int32_t(n));
}

static int64_t round_up(int64_t x, int64_t m) { return m > 1 ? (x + m - 1) / m * m : x; }

Batch BatchBuilder::build(BatchMode mode, int64_t pad_to_multiple_of, int32_t pad_id) const {
  const int64_t B = num_sequences();
  BIOFM_CHECK(B > 0, "building an empty batch");
  int32_t max_len = *std::max_element(lens_.begin(), lens_.end());
  int64_t rows = 0, stride = 0;
  if (mode == BatchMode::Thd) {
    rows = round_up(num_tokens(), pad_to_multiple_of);
  } else {
    stride = round_up(max_len, pad_to_multiple_of);
    rows = B * stride;
  }
  if (rows >= (int64_t(1) << 31)) fail("batch of ", rows, " rows does not fit int32 cu_seqlens");

  std::vector<int32_t> ids(size_t(rows), pad_id), labels(size_t(rows), kIgnoreLabel), pos(size_t(rows), 0);
  std::vector<int32_t> cu(size_t(B + 1));
  int64_t src = 0, label_tokens = 0;
  for (int64_t s = 0; s < B; ++s) {
    int64_t start = mode == BatchMode::Thd ? src : s * stride;
    int32_t n = lens_[size_t(s)];
    cu[size_t(s)] = int32_t(start);
    std::copy_n(ids_.begin() + src, n, ids.begin() + start);
    std::copy_n(labels_.begin() + src, n, labels.begin() + start);
    for (int32_t t = 0; t < n; ++t) {
      pos[size_t(start + t)] = t;
      label_tokens += labels_[size_t(src + t)] != kIgnoreLabel;
    }
    src += n;
  }
  cu[size_t(B)] = int32_t(rows);

  Batch b;
  b.input_ids = Tensor::from_i32({rows}, ids);
  b.labels = Tensor::from_i32({rows}, labels);
  b.positions = Tensor::from_i32({rows}, pos);
  b.cu_seqlens = Tensor::from_i32({B + 1}, cu);
  b.seq_lens = Tensor::from_i32({B}, lens_);
  b.max_seqlen = max_len;
  b.num_real_tokens = num_tokens();
  b.num_label_tokens = label_tokens;
  return b;
}

}  // namespace biofm
