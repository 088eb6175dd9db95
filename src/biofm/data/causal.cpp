#include "biofm/data/causal.h"

#include <algorithm>

#include "biofm/core/error.h"

namespace biofm {

void validate(const CausalLmOptions& o) {
  if (o.max_seq_length < 3)
    fail("causal lm: max_seq_length must be at least 3 (<BOS>, one base, <EOS>), got ", o.max_seq_length);
  if (o.stride < 0 || o.stride >= o.max_seq_length - 2)
    fail("causal lm: stride (", o.stride, ") must lie in [0, max_seq_length - 2 = ", o.max_seq_length - 2, ")");
  if (o.pad_to_multiple_of < 0) fail("causal lm: pad_to_multiple_of must be >= 0, got ", o.pad_to_multiple_of);
  if (o.mode == BatchMode::Thd) {
    if (o.max_tokens_per_batch < o.max_seq_length)
      fail("causal lm: max_tokens_per_batch (", o.max_tokens_per_batch, ") must be >= max_seq_length (",
           o.max_seq_length, ") in thd mode, so that every window fits a batch");
    if (o.pad_to_multiple_of > 1 && o.max_tokens_per_batch % o.pad_to_multiple_of != 0)
      fail("causal lm: max_tokens_per_batch (", o.max_tokens_per_batch,
           ") must be a multiple of pad_to_multiple_of (", o.pad_to_multiple_of, ") in thd mode");
  } else {
    if (o.micro_batch_size < 1)
      fail("causal lm: micro_batch_size must be >= 1 in bshd mode, got ", o.micro_batch_size);
  }
}

uint64_t num_windows(uint64_t length, int64_t max_seq_length, int64_t stride) {
  uint64_t c = uint64_t(max_seq_length - 2), step = c - uint64_t(stride);
  if (length == 0) return 0;
  if (length <= c) return 1;
  return 1 + (length - c + step - 1) / step;
}

std::vector<Window> make_windows(uint64_t length, int64_t max_seq_length, int64_t stride) {
  uint64_t c = uint64_t(max_seq_length - 2), step = c - uint64_t(stride);
  uint64_t n = num_windows(length, max_seq_length, stride);
  std::vector<Window> w(n);
  for (uint64_t j = 0; j < n; ++j) {
    w[j].start = j * step;
    w[j].length = std::min(c, length - w[j].start);
  }
  return w;
}

void causal_labels(const std::vector<int32_t>& ids, std::vector<int32_t>& labels, bool genomic_masking,
                   bool uppercase_labels) {
  const size_t n = ids.size();
  labels.assign(n, kIgnoreLabel);
  for (size_t t = 0; t + 1 < n; ++t) {
    int32_t target = ids[t + 1];
    if (genomic_masking && !NucleotideTokenizer::is_acgt(target)) continue;
    if (uppercase_labels && target >= 'a' && target <= 'z' && NucleotideTokenizer::is_acgt(target))
      target -= 'a' - 'A';
    labels[t] = target;
  }
}

CausalLmBatcher::CausalLmBatcher(const SequenceCorpus& dataset, const CausalLmOptions& options,
                                 const Tokenizer& tok)
    : dataset_(dataset), opt_(options), tok_(tok) {
  validate(opt_);
  if (dataset_.empty()) fail("causal lm: the dataset holds no sequences");
  if (dataset_.clustered())
    fail("causal lm: cluster sampling is for masked-LM (ESM-2) data; set dataset.cluster_sampling=false or prepare "
         "without --cluster-column");
  if (dataset_.sequential()) {
    // A stream comes cut into windows already (StreamingCorpus with the same window options):
    // every record is one window, in training order.
    order_ = SampleOrder(dataset_.size(), opt_.seed, false);
    return;
  }
  window_offsets_.resize(dataset_.size() + 1);
  window_offsets_[0] = 0;
  for (uint64_t r = 0; r < dataset_.size(); ++r)
    window_offsets_[r + 1] = window_offsets_[r] + num_windows(dataset_.length(r), opt_.max_seq_length, opt_.stride);
  order_ = SampleOrder(num_samples(), opt_.seed, opt_.shuffle);
}

std::pair<uint64_t, Window> CausalLmBatcher::window(uint64_t w) const {
  BIOFM_CHECK(w < num_samples(), "window ", w, " of ", num_samples());
  if (dataset_.sequential()) {
    const uint64_t len = dataset_.length(w);
    if (len > uint64_t(opt_.max_seq_length - 2))
      fail("causal lm: streamed record ", w, " holds ", len, " bases, more than a window of ", opt_.max_seq_length - 2,
           " (the stream must be cut with the batcher's max_seq_length)");
    return {w, Window{0, len}};
  }
  auto it = std::upper_bound(window_offsets_.begin(), window_offsets_.end(), w);
  uint64_t r = uint64_t(it - window_offsets_.begin()) - 1;
  uint64_t j = w - window_offsets_[r];
  uint64_t c = uint64_t(opt_.max_seq_length - 2), step = c - uint64_t(opt_.stride);
  Window win;
  win.start = j * step;
  win.length = std::min(c, dataset_.length(r) - win.start);
  return {r, win};
}

int64_t CausalLmBatcher::sample_tokens(uint64_t w) const { return int64_t(window(w).second.length) + 2; }

void CausalLmBatcher::add_sample(uint64_t w, CausalLmStats* st) {
  auto [r, win] = window(w);
  ids_.clear();
  ids_.push_back(tok_.begin_id());
  uint64_t unk = dataset_.append_tokens(r, win.start, win.length, tok_, ids_);
  ids_.push_back(tok_.end_id());
  causal_labels(ids_, labels_, opt_.genomic_masking, opt_.uppercase_labels);
  builder_.add(ids_.data(), labels_.data(), int64_t(ids_.size()));
  if (st) {
    st->windows += 1;
    st->unknown_tokens += unk;
    st->real_tokens += ids_.size();
  }
}

void CausalLmBatcher::skip() {
  cursor_ += samples_in_batch(opt_.mode, opt_.max_tokens_per_batch, opt_.micro_batch_size,
                              [&](uint64_t k) { return sample_tokens(order_(cursor_ + k)); });
}

Batch CausalLmBatcher::next() {
  builder_.clear();
  if (opt_.mode == BatchMode::Thd) {
    for (;;) {
      uint64_t w = order_(cursor_);
      int64_t n = sample_tokens(w);
      if (builder_.num_sequences() > 0 && builder_.num_tokens() + n > opt_.max_tokens_per_batch) break;
      add_sample(w, &stats_);
      ++cursor_;
      if (builder_.num_tokens() == opt_.max_tokens_per_batch) break;
    }
  } else {
    for (int64_t s = 0; s < opt_.micro_batch_size; ++s) {
      add_sample(order_(cursor_), &stats_);
      ++cursor_;
    }
  }
  Batch b = builder_.build(opt_.mode, opt_.pad_to_multiple_of, tok_.pad_id());
  stats_.batches += 1;
  stats_.label_tokens += uint64_t(b.num_label_tokens);
  stats_.padding_tokens += uint64_t(b.num_rows() - b.num_real_tokens);
  return b;
}

CausalLmStats CausalLmBatcher::stats() const {
  CausalLmStats s = stats_;
  s.epochs = epoch();
  return s;
}

bool CausalLmBatcher::next_eval(Batch& batch) {
  if (dataset_.sequential()) fail("causal lm: a streamed dataset cannot be an evaluation set (give a file or a prepared directory)");
  const uint64_t n = num_samples();
  if (eval_cursor_ >= n) {
    eval_cursor_ = 0;
    return false;
  }
  builder_.clear();
  if (opt_.mode == BatchMode::Thd) {
    while (eval_cursor_ < n) {
      int64_t t = sample_tokens(eval_cursor_);
      if (builder_.num_sequences() > 0 && builder_.num_tokens() + t > opt_.max_tokens_per_batch) break;
      add_sample(eval_cursor_, nullptr);
      ++eval_cursor_;
    }
  } else {
    for (int64_t s = 0; s < opt_.micro_batch_size && eval_cursor_ < n; ++s, ++eval_cursor_)
      add_sample(eval_cursor_, nullptr);
  }
  batch = builder_.build(opt_.mode, opt_.pad_to_multiple_of, tok_.pad_id());
  return true;
}

}  // namespace biofm
