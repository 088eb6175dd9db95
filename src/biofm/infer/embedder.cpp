#include "biofm/infer/embedder.h"

#include <cstring>

#include "biofm/core/error.h"
#include "biofm/data/pack.h"
#include "biofm/infer/batching.h"

namespace biofm::infer {

namespace {

struct Item {
  int64_t record = 0;  // local index in the range
  bool first = false, last = false;
  KeptWindow w;
  int64_t tokens() const { return int64_t(w.length) + 2; }
};

std::vector<KeptWindow> record_windows(uint64_t length, const EmbedOptions& o, bool causal, bool* truncated) {
  *truncated = false;
  if (o.windows) return kept_windows(length, o.window_tokens, o.stride, causal);
  KeptWindow w;
  w.length = length;
  if (int64_t(length) + 2 > o.window_tokens) {
    w.length = uint64_t(o.window_tokens - 2);
    *truncated = true;
  }
  w.keep_end = w.length;
  return {w};
}

// One batch on its way: the host batch and its items, then (launched) the device results.
struct Pending {
  std::vector<int64_t> items;
  Batch host;
  std::vector<std::vector<int32_t>> select;  // rows pooled into each item (pooled output)
  Tensor select_t;                           // their selection matrix (pooling.h), on the host
  std::vector<Tensor> pooled_dev;            // per layer, launched select sums
  std::vector<Tensor> states;                // per layer [T, H] (per_token)
  Tensor logits;
};

}  // namespace

int64_t record_tokens(uint64_t length, const EmbedOptions& o) {
  bool t = false;
  int64_t n = 0;
  for (const KeptWindow& w : record_windows(length, o, false, &t)) n += int64_t(w.length) + 2;
  return n;
}

int64_t record_rows(uint64_t length, const EmbedOptions& o) {
  bool t = false;
  int64_t kept = 0;
  for (const KeptWindow& w : record_windows(length, o, false, &t)) kept += int64_t(w.keep_end - w.keep_begin);
  return kept + 2;
}

Embedder::Embedder(LanguageModel& model, const Tokenizer& tok, EmbedOptions o, bool causal)
    : model_(model), tok_(tok), o_(std::move(o)), causal_(causal) {
  if (o_.window_tokens < 3) fail("windows need at least 3 tokens (<begin>, one residue, <end>)");
  if (o_.windows && (o_.stride < 0 || o_.stride >= o_.window_tokens - 2))
    fail("--stride (", o_.stride, ") must lie in [0, window - 2 = ", o_.window_tokens - 2, ")");
  if (o_.layers.empty()) fail("no layers to embed");
  if (o_.pooling == Pooling::None) o_.per_token = true;
}

EmbedResult Embedder::run(const SequenceDataset& data, uint64_t first, uint64_t n, Progress* progress) {
  const int64_t H = model_.dims().hidden, V = model_.dims().vocab;
  const size_t NL = o_.layers.size();
  const bool pooled = o_.pooling != Pooling::None, per_token = o_.per_token, want_logits = per_token && o_.logits;
  EmbedResult res;

  // Items (windows) and, per record, its output rows.
  std::vector<Item> items;
  std::vector<int64_t> rows_of(n, 0), windows_left(n, 0);
  std::vector<int32_t> scratch;
  for (uint64_t r = 0; r < n; ++r) {
    const std::string_view seq = data.sequence(first + r);
    scratch.clear();
    res.unknown += tok_.encode_residues(seq, scratch);
    bool truncated = false;
    const std::vector<KeptWindow> ws = record_windows(seq.size(), o_, causal_, &truncated);
    res.truncated += truncated;
    uint64_t kept = 0;
    for (size_t j = 0; j < ws.size(); ++j) {
      items.push_back({int64_t(r), j == 0, j + 1 == ws.size(), ws[j]});
      kept += ws[j].keep_end - ws[j].keep_begin;
    }
    rows_of[r] = int64_t(kept) + 2;
    windows_left[r] = int64_t(ws.size());
  }
  res.windows = items.size();
  if (per_token) {
    res.offsets.assign(1, 0);
    for (uint64_t r = 0; r < n; ++r) res.offsets.push_back(res.offsets.back() + rows_of[r]);
    const int64_t T = res.offsets.back();
    res.ids.assign(size_t(T), tok_.pad_id());
    for (size_t l = 0; l < NL; ++l) res.token_states.push_back(Tensor::zeros({T, H}, DType::F32));
    if (want_logits) res.logits = Tensor::zeros({T, V}, DType::F32);
  }
  std::vector<Tensor> sums;
  std::vector<int64_t> counts(n, 0);
  if (pooled)
    for (size_t l = 0; l < NL; ++l) sums.push_back(Tensor::zeros({int64_t(n), H}, DType::F32));

  std::vector<int64_t> lengths;
  for (const Item& it : items) lengths.push_back(it.tokens());
  const std::vector<std::vector<int64_t>> plan = plan_batches(lengths, o_.max_tokens);
  // Every batch's shape is known now: the model prepares for them all at once (the GPU builds the
  // attention graphs they need in the background while the first batches run).
  model_.prepare_forward(batch_shapes(plan, lengths));

  // Host work of one batch: ids, and the rows each item pools.
  auto prepare = [&](const std::vector<int64_t>& members) {
    Pending p;
    p.items = members;
    BatchBuilder builder;
    std::vector<int32_t> ids, labels;
    int64_t row0 = 0;
    for (int64_t i : members) {
      const Item& it = items[size_t(i)];
      const std::string_view seq = data.sequence(first + uint64_t(it.record));
      ids.clear();
      ids.push_back(tok_.begin_id());
      tok_.encode_residues(seq.substr(size_t(it.w.start), size_t(it.w.length)), ids);
      ids.push_back(tok_.end_id());
      labels.assign(ids.size(), kIgnoreLabel);
      builder.add(ids.data(), labels.data(), int64_t(ids.size()));
      if (pooled) {
        std::vector<int32_t> sel;
        if (o_.pooling == Pooling::Mean) {
          for (uint64_t b = it.w.keep_begin; b < it.w.keep_end; ++b) sel.push_back(int32_t(row0 + 1 + int64_t(b - it.w.start)));
        } else if (o_.pooling == Pooling::Cls) {
          if (it.first) sel.push_back(int32_t(row0));
        } else if (it.last) {
          sel.push_back(int32_t(row0 + it.tokens() - 1));
        }
        p.select.push_back(std::move(sel));
      }
      row0 += it.tokens();
    }
    p.host = builder.build(BatchMode::Thd, 1, tok_.pad_id());
    if (pooled) p.select_t = selection_matrix(p.select, p.host.num_rows(), o_.act_dtype);
    return p;
  };
  // Device work: uploads (before the forward pass, so that copying from pageable memory does
  // not wait for it), forward, pooling GEMMs; nothing waits for the device here.
  auto launch = [&](Pending& p) {
    const Batch db = p.host.to(model_.device());
    const Tensor sel_t = pooled ? p.select_t.to(model_.device()) : Tensor();
    std::vector<Tensor> states = model_.layer_hidden_states(db, o_.layers);
    if (pooled)
      for (const Tensor& s : states) {
        if (s.dtype() != sel_t.dtype())
          fail("embed: hidden states are ", dtype_name(s.dtype()), ", expected ", dtype_name(sel_t.dtype()));
        p.pooled_dev.push_back(launch_select_sum(s, sel_t));
      }
    if (per_token) p.states = std::move(states);
    if (want_logits) p.logits = model_.logits(db);
  };
  // Results to the host, each into its record's place.
  auto collect = [&](Pending& p) {
    const int64_t R = int64_t(p.items.size());
    for (size_t l = 0; l < p.pooled_dev.size(); ++l) {
      const Tensor got = finish_select_sum(p.pooled_dev[l], R);
      for (int64_t k = 0; k < R; ++k) {
        const Item& it = items[size_t(p.items[size_t(k)])];
        float* dst = sums[l].f32() + it.record * H;
        const float* src = got.f32() + k * H;
        for (int64_t h = 0; h < H; ++h) dst[h] += src[h];
      }
    }
    if (pooled)
      for (int64_t k = 0; k < R; ++k) counts[size_t(items[size_t(p.items[size_t(k)])].record)] += int64_t(p.select[size_t(k)].size());
    if (per_token) {
      std::vector<Tensor> host_states;
      for (const Tensor& s : p.states) host_states.push_back(s.to(Device::CPU).to(DType::F32));
      const Tensor lg = want_logits ? p.logits.to(Device::CPU).to(DType::F32) : Tensor();
      const int32_t* ids = p.host.input_ids.i32();
      int64_t row0 = 0;
      for (int64_t i : p.items) {
        const Item& it = items[size_t(i)];
        const int64_t base_row = res.offsets[size_t(it.record)], len = it.tokens();
        auto copy_row = [&](int64_t src_row, int64_t dst_row) {
          res.ids[size_t(dst_row)] = ids[src_row];
          for (size_t l = 0; l < NL; ++l)
            std::memcpy(res.token_states[l].f32() + dst_row * H, host_states[l].f32() + src_row * H, size_t(H) * 4);
          if (want_logits) std::memcpy(res.logits.f32() + dst_row * V, lg.f32() + src_row * V, size_t(V) * 4);
        };
        if (it.first) copy_row(row0, base_row);
        for (uint64_t b = it.w.keep_begin; b < it.w.keep_end; ++b)
          copy_row(row0 + 1 + int64_t(b - it.w.start), base_row + 1 + int64_t(b));
        if (it.last) copy_row(row0 + len - 1, base_row + rows_of[size_t(it.record)] - 1);
        row0 += len;
      }
    }
    int64_t done = 0, tokens = 0;
    for (int64_t i : p.items) {
      const Item& it = items[size_t(i)];
      done += --windows_left[size_t(it.record)] == 0;
      tokens += it.tokens();
    }
    res.tokens += tokens;
    if (progress) progress->add(done, tokens);
  };

  if (!plan.empty()) {
    Pending cur = prepare(plan[0]);
    for (size_t k = 0; k < plan.size(); ++k) {
      launch(cur);
      Pending next;
      if (k + 1 < plan.size()) next = prepare(plan[k + 1]);  // host work while the device runs
      collect(cur);
      if (o_.after_batch) o_.after_batch();
      cur = std::move(next);
    }
  }
  if (pooled) {
    for (size_t l = 0; l < NL; ++l)
      for (uint64_t r = 0; r < n; ++r) {
        const float inv = counts[r] > 0 ? 1.0f / float(counts[r]) : 0.0f;
        float* row = sums[l].f32() + int64_t(r) * H;
        for (int64_t h = 0; h < H; ++h) row[h] *= inv;
      }
    res.pooled = std::move(sums);
  }
  return res;
}

}  // namespace biofm::infer
