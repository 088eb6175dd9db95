#include "biofm/data/mlm.h"

#include <algorithm>

#include "biofm/core/error.h"

namespace biofm {

void validate(const MlmOptions& o) {
  if (o.max_seq_length < 3)
    fail("mlm: max_seq_length must be at least 3 (<cls>, one residue, <eos>), got ", o.max_seq_length);
  if (!(o.mlm_probability >= 0.0 && o.mlm_probability <= 1.0))
    fail("mlm: mlm_probability must lie in [0, 1], got ", o.mlm_probability);
  if (!(o.mask_replace_prob >= 0.0 && o.random_replace_prob >= 0.0 &&
        o.mask_replace_prob + o.random_replace_prob <= 1.0 + 1e-9))
    fail("mlm: mask_replace_prob (", o.mask_replace_prob, ") and random_replace_prob (",
         o.random_replace_prob, ") must be >= 0 with a sum <= 1");
  if (o.pad_to_multiple_of < 0) fail("mlm: pad_to_multiple_of must be >= 0, got ", o.pad_to_multiple_of);
  if (o.mode == BatchMode::Thd) {
    if (o.max_tokens_per_batch < o.max_seq_length)
      fail("mlm: max_tokens_per_batch (", o.max_tokens_per_batch, ") must be >= max_seq_length (",
           o.max_seq_length, ") in thd mode, so that every sequence fits a batch");
    if (o.pad_to_multiple_of > 1 && o.max_tokens_per_batch % o.pad_to_multiple_of != 0)
      fail("mlm: max_tokens_per_batch (", o.max_tokens_per_batch, ") must be a multiple of pad_to_multiple_of (",
           o.pad_to_multiple_of, ") in thd mode, so that padding never exceeds the budget");
  } else {
    if (o.micro_batch_size < 1) fail("mlm: micro_batch_size must be >= 1 in bshd mode, got ", o.micro_batch_size);
  }
}

void apply_mlm_mask(std::vector<int32_t>& ids, std::vector<int32_t>& labels, uint64_t seed, RngStream stream,
                    uint64_t index, const MlmOptions& o, const Tokenizer& tok) {
  labels.assign(ids.size(), kIgnoreLabel);
  const float p = float(o.mlm_probability);
  const float pm = float(o.mask_replace_prob);
  const float pr = float(o.mask_replace_prob + o.random_replace_prob);
  for (size_t t = 0; t < ids.size(); ++t) {
    int32_t id = ids[t];
    if (tok.is_special(id)) continue;
    auto b = rng_block(seed, stream, index, uint32_t(t));
    if (!(u32_to_unit(b[0]) < p)) continue;
    labels[t] = id;
    float u = u32_to_unit(b[1]);
    if (u < pm)
      ids[t] = tok.mask_id();
    else if (u < pr)
      ids[t] = int32_t((uint64_t(b[2]) * uint64_t(tok.vocab_size())) >> 32);
  }
}

MlmBatcher::MlmBatcher(const SequenceCorpus& dataset, const MlmOptions& options, const Tokenizer& tok)
    : dataset_(dataset), opt_(options), tok_(tok) {
  if (tok_.mask_id() < 0) fail("masked-LM batches need a tokenizer with a mask token");
  validate(opt_);
  if (dataset_.empty()) fail("mlm: the dataset holds no sequences");
  order_ = SampleOrder(dataset_.size(), opt_.seed, opt_.shuffle && !dataset_.sequential());
}

uint64_t MlmBatcher::record_at(uint64_t cursor) const {
  return dataset_.resolve(order_(cursor), order_.epoch_of(cursor));
}

int64_t MlmBatcher::sample_tokens(uint64_t rec) const {
  return std::min<int64_t>(int64_t(dataset_.length(rec)) + 2, opt_.max_seq_length);
}

void MlmBatcher::add_sample(uint64_t rec, uint64_t seed, RngStream stream, uint64_t index, MlmStats* st) {
  const uint64_t len = dataset_.length(rec), keep = uint64_t(opt_.max_seq_length - 2);
  const bool truncated = len > keep;
  ids_.clear();
  ids_.push_back(tok_.begin_id());
  uint64_t unk = dataset_.append_tokens(rec, 0, truncated ? keep : len, tok_, ids_);
  ids_.push_back(tok_.end_id());
  apply_mlm_mask(ids_, labels_, seed, stream, index, opt_, tok_);
  builder_.add(ids_.data(), labels_.data(), int64_t(ids_.size()));
  if (st) {
    st->sequences += 1;
    st->truncated += truncated;
    st->unknown_tokens += unk;
    st->real_tokens += ids_.size();
  }
}

void MlmBatcher::skip() {
  cursor_ += samples_in_batch(opt_.mode, opt_.max_tokens_per_batch, opt_.micro_batch_size,
                              [&](uint64_t k) { return sample_tokens(record_at(cursor_ + k)); });
}

Batch MlmBatcher::next() {
  builder_.clear();
  if (opt_.mode == BatchMode::Thd) {
    for (;;) {
      uint64_t rec = record_at(cursor_);
      int64_t n = sample_tokens(rec);
      if (builder_.num_sequences() > 0 && builder_.num_tokens() + n > opt_.max_tokens_per_batch) break;
      add_sample(rec, opt_.seed, RngStream::Mask, cursor_, &stats_);
      ++cursor_;
      if (builder_.num_tokens() == opt_.max_tokens_per_batch) break;
    }
  } else {
    for (int64_t s = 0; s < opt_.micro_batch_size; ++s) {
      add_sample(record_at(cursor_), opt_.seed, RngStream::Mask, cursor_, &stats_);
      ++cursor_;
    }
  }
  Batch b = builder_.build(opt_.mode, opt_.pad_to_multiple_of, tok_.pad_id());
  stats_.batches += 1;
  stats_.label_tokens += uint64_t(b.num_label_tokens);
  stats_.padding_tokens += uint64_t(b.num_rows() - b.num_real_tokens);
  return b;
}

MlmStats MlmBatcher::stats() const {
  MlmStats s = stats_;
  s.epochs = epoch();
  return s;
}

bool MlmBatcher::next_eval(Batch& batch) {
  if (dataset_.sequential()) fail("mlm: a streamed dataset cannot be an evaluation set (give a file or a prepared directory)");
  const uint64_t n = dataset_.size();
  if (eval_cursor_ >= n) {
    eval_cursor_ = 0;
    return false;
  }
  builder_.clear();
  if (opt_.mode == BatchMode::Thd) {
    while (eval_cursor_ < n) {
      const uint64_t rec = dataset_.resolve(eval_cursor_, 0);
      int64_t t = sample_tokens(rec);
      if (builder_.num_sequences() > 0 && builder_.num_tokens() + t > opt_.max_tokens_per_batch) break;
      add_sample(rec, opt_.eval_seed, RngStream::Eval, eval_cursor_, nullptr);
      ++eval_cursor_;
    }
  } else {
    for (int64_t s = 0; s < opt_.micro_batch_size && eval_cursor_ < n; ++s, ++eval_cursor_)
      add_sample(dataset_.resolve(eval_cursor_, 0), opt_.eval_seed, RngStream::Eval, eval_cursor_, nullptr);
  }
  batch = builder_.build(opt_.mode, opt_.pad_to_multiple_of, tok_.pad_id());
  return true;
}

}  // namespace biofm
