#include "biofm/data/context_parallel.h"

#include <algorithm>
#include <vector>

#include "biofm/core/error.h"
#include "biofm/data/pack.h"
#include "biofm/ops/embedding/op.h"

namespace biofm {

ContextParallelShard ContextParallelShard::to(Device d) const {
  ContextParallelShard s = *this;
  s.global_cu_seqlens = global_cu_seqlens.to(d);
  s.global_seq_lens = global_seq_lens.to(d);
  s.local_to_global = local_to_global.to(d);
  s.gathered_to_global = gathered_to_global.to(d);
  s.token_dropout_scale = token_dropout_scale.to(d);
  return s;
}

namespace {

// The group's rows of sequence s that rank r keeps, in its order: chunks r and 2C-1-r of the
// padded slot (offsets j within the slot).
template <class F>
void for_each_kept_offset(int64_t padded_len, int r, int C, F&& f) {
  const int64_t c = padded_len / (2 * C);
  for (int64_t j = int64_t(r) * c; j < int64_t(r + 1) * c; ++j) f(j);
  for (int64_t j = int64_t(2 * C - 1 - r) * c; j < int64_t(2 * C - r) * c; ++j) f(j);
}

}  // namespace

Batch context_parallel_share(const Batch& group, int cp_rank, int cp_size, int32_t pad_id, int32_t mask_id) {
  if (cp_size < 1 || cp_rank < 0 || cp_rank >= cp_size)
    fail("context parallelism: rank ", cp_rank, " of a group of ", cp_size);
  if (group.input_ids.device() != Device::CPU) fail("context parallelism: the group's batch must be on the CPU");
  const int C = cp_size;
  const int64_t B = group.num_sequences();
  const int32_t* ids = group.input_ids.i32();
  const int32_t* labels = group.labels.i32();
  const int32_t* pos = group.positions.i32();
  const int32_t* cu = group.cu_seqlens.i32();
  const int32_t* len = group.seq_lens.i32();

  // The group's layout: each sequence in a slot of its length rounded up to 2C rows.
  const size_t nseq = size_t(B);
  std::vector<int32_t> gcu(nseq + 1, 0), padded(nseq, 0);
  for (int64_t s = 0; s < B; ++s) {
    padded[size_t(s)] = int32_t((int64_t(len[s]) + 2 * C - 1) / (2 * C) * (2 * C));
    gcu[size_t(s) + 1] = gcu[size_t(s)] + padded[size_t(s)];
  }
  const int64_t global_rows = gcu[size_t(B)], T = global_rows / C;

  // Where every rank's rows go (the gather), and this rank's rows.
  std::vector<int32_t> gathered_to_global(size_t(global_rows), 0), local_to_global;
  local_to_global.reserve(size_t(T));
  for (int k = 0; k < C; ++k) {
    int64_t t = 0;
    for (int64_t s = 0; s < B; ++s)
      for_each_kept_offset(padded[size_t(s)], k, C, [&](int64_t j) {
        const int64_t g = gcu[size_t(s)] + j;
        gathered_to_global[size_t(g)] = int32_t(int64_t(k) * T + t++);
        if (k == cp_rank) local_to_global.push_back(int32_t(g));
      });
  }

  // ESM-2's token dropout factor of each sequence, from all of its tokens.
  std::vector<float> seq_factor(nseq, 1.0f);
  if (mask_id >= 0)
    for (int64_t s = 0; s < B; ++s) {
      int64_t n_mask = 0;
      for (int64_t i = cu[s]; i < cu[s] + len[s]; ++i) n_mask += ids[i] == mask_id;
      seq_factor[size_t(s)] = ops::esm_token_dropout_factor(n_mask, len[s]);
    }

  std::vector<int32_t> out_ids, out_labels, out_pos, out_cu(1, 0), out_len;
  std::vector<float> scale;
  int64_t real = 0, label_tokens = 0;
  int32_t max_local = 0;
  for (int64_t s = 0; s < B; ++s) {
    int32_t kept_real = 0;
    for_each_kept_offset(padded[size_t(s)], cp_rank, C, [&](int64_t j) {
      if (j < len[s]) {
        const int64_t i = cu[s] + j;
        out_ids.push_back(ids[i]);
        out_labels.push_back(labels[i]);
        out_pos.push_back(pos[i]);
        scale.push_back(mask_id >= 0 && ids[i] == mask_id ? 0.0f : seq_factor[size_t(s)]);
        label_tokens += labels[i] != kIgnoreLabel;
        ++kept_real;
      } else {
        out_ids.push_back(pad_id);
        out_labels.push_back(kIgnoreLabel);
        out_pos.push_back(0);
        scale.push_back(0.0f);
      }
    });
    out_cu.push_back(int32_t(out_ids.size()));
    out_len.push_back(kept_real);
    real += kept_real;
    max_local = std::max(max_local, kept_real);
  }

  Batch b;
  const int64_t n = int64_t(out_ids.size());
  b.input_ids = Tensor::from_i32({n}, out_ids);
  b.labels = Tensor::from_i32({n}, out_labels);
  b.positions = Tensor::from_i32({n}, out_pos);
  b.cu_seqlens = Tensor::from_i32({B + 1}, out_cu);
  b.seq_lens = Tensor::from_i32({B}, out_len);
  b.max_seqlen = max_local;
  b.num_real_tokens = real;
  b.num_label_tokens = label_tokens;

  auto shard = std::make_shared<ContextParallelShard>();
  shard->cp_rank = cp_rank;
  shard->cp_size = C;
  shard->global_cu_seqlens = Tensor::from_i32({B + 1}, gcu);
  shard->global_seq_lens = group.seq_lens;  // (whole sequences: the group's own lengths)
  shard->global_max_seqlen = group.max_seqlen;
  shard->global_rows = global_rows;
  bool uniform = B > 0 && group.max_seqlen > 0;
  for (int64_t s = 0; s < B; ++s) uniform = uniform && len[s] == group.max_seqlen && padded[size_t(s)] == len[s];
  shard->global_uniform = uniform;
  shard->local_to_global = Tensor::from_i32({T}, local_to_global);
  shard->gathered_to_global = Tensor::from_i32({global_rows}, gathered_to_global);
  shard->token_dropout_scale = Tensor::from_f32({n}, scale);
  shard->group_label_tokens = group.num_label_tokens;
  b.cp = std::move(shard);
  return b;
}

namespace {

class ContextParallelSlice : public BatchSource {
 public:
  ContextParallelSlice(std::unique_ptr<BatchSource> inner, int cp_rank, int cp_size, int32_t pad_id, int32_t mask_id)
      : inner_(std::move(inner)), rank_(cp_rank), size_(cp_size), pad_id_(pad_id), mask_id_(mask_id) {}

  Batch next() override { return context_parallel_share(inner_->next(), rank_, size_, pad_id_, mask_id_); }
  void skip() override { inner_->skip(); }
  uint64_t cursor() const override { return inner_->cursor(); }
  void set_cursor(uint64_t c) override { inner_->set_cursor(c); }
  uint64_t epoch() const override { return inner_->epoch(); }
  uint64_t samples_per_epoch() const override { return inner_->samples_per_epoch(); }
  bool next_eval(Batch& b) override {
    Batch group;
    if (!inner_->next_eval(group)) return false;
    b = context_parallel_share(group, rank_, size_, pad_id_, mask_id_);
    return true;
  }
  void reset_eval() override { inner_->reset_eval(); }
  std::string summary() const override { return inner_->summary(); }

 private:
  std::unique_ptr<BatchSource> inner_;
  const int rank_, size_;
  const int32_t pad_id_, mask_id_;
};

}  // namespace

std::unique_ptr<BatchSource> slice_for_context_parallel(std::unique_ptr<BatchSource> inner, int cp_rank,
                                                        int cp_size, int32_t pad_id, int32_t mask_id) {
  if (cp_size < 1 || cp_rank < 0 || cp_rank >= cp_size)
    fail("context parallelism: rank ", cp_rank, " of a group of ", cp_size);
  if (cp_size == 1) return inner;
  return std::make_unique<ContextParallelSlice>(std::move(inner), cp_rank, cp_size, pad_id, mask_id);
}

}  // namespace biofm
