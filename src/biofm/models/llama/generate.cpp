#include "biofm/models/llama/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "biofm/core/rng.h"

namespace biofm {

int32_t sample_next_token(const float* logits, int64_t V, const GenerateOptions& o, uint64_t step) {
  if (V <= 0) fail("sample_next_token: empty logits");
  // Candidates: the allowed ids (every id when none are given), in id order.
  std::vector<int32_t> cand;
  if (o.allowed.empty()) {
    cand.resize(static_cast<size_t>(V));
    std::iota(cand.begin(), cand.end(), 0);
  } else {
    for (int32_t a : o.allowed)
      if (a >= 0 && a < V) cand.push_back(a);
    std::sort(cand.begin(), cand.end());
    cand.erase(std::unique(cand.begin(), cand.end()), cand.end());
    if (cand.empty()) fail("sample_next_token: none of the allowed tokens is in the vocabulary (", V, ")");
  }
  if (!(o.temperature > 0)) {
    int32_t best = cand[0];
    for (int32_t c : cand)
      if (logits[c] > logits[best]) best = c;
    return best;
  }
  // Then the top_k largest logits among them (ties broken by the lower id).
  const int64_t n = int64_t(cand.size());
  if (o.top_k > 0 && o.top_k < n) {
    auto by_logit = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    std::partial_sort(cand.begin(), cand.begin() + o.top_k, cand.end(), by_logit);
    cand.resize(size_t(o.top_k));
    std::sort(cand.begin(), cand.end());  // cumulate in id order
  }
  double mx = -INFINITY;
  for (int32_t c : cand) mx = std::max(mx, double(logits[c]) / o.temperature);
  std::vector<double> w(cand.size());
  double total = 0;
  for (size_t i = 0; i < cand.size(); ++i) {
    w[i] = std::exp(double(logits[cand[i]]) / o.temperature - mx);
    total += w[i];
  }
  const double u = double(rng_uniform(o.seed, RngStream::Sample, step, 0)) * total;
  double acc = 0;
  for (size_t i = 0; i < cand.size(); ++i) {
    acc += w[i];
    if (u < acc) return cand[i];
  }
  return cand.back();
}

namespace {

void check_prompt(const LlamaModel& model, const std::vector<int32_t>& prompt, const GenerateOptions& o) {
  if (prompt.empty()) fail("generate: the prompt is empty (it should hold at least <BOS>)");
  for (int32_t t : prompt)
    if (t < 0 || t >= model.config().vocab_size)
      fail("generate: prompt token ", t, " is outside the vocabulary (", model.config().vocab_size, ")");
  if (o.max_new_tokens < 0) fail("generate: max_new_tokens must be >= 0, got ", o.max_new_tokens);
  if (o.temperature < 0) fail("generate: temperature must be >= 0, got ", o.temperature);
  if (o.top_k < 0) fail("generate: top_k must be >= 0, got ", o.top_k);
}

// Appends the token picked from the last row of `logits` [n,V] (only that row comes to the
// host); true when generation stops.
bool take_step(const LlamaModel& model, const Tensor& logits, const GenerateOptions& o, GenerateResult& r) {
  Tensor host = logits.narrow0(logits.size(0) - 1, 1).to(Device::CPU).to(DType::F32);
  const int64_t V = host.size(1);
  const int32_t tok = sample_next_token(host.f32(), V, o, uint64_t(r.tokens.size()));
  r.tokens.push_back(tok);
  if (o.stop_at_eos && tok == model.config().eos_token_id) {
    r.stopped_at_eos = true;
    return true;
  }
  return int64_t(r.tokens.size()) >= o.max_new_tokens;
}

}  // namespace

GenerateResult generate(LlamaModel& model, const std::vector<int32_t>& prompt, const GenerateOptions& o) {
  if (!o.use_cache) return generate_uncached(model, prompt, o);
  check_prompt(model, prompt, o);
  GenerateResult r;
  if (o.max_new_tokens == 0) return r;
  LlamaKvCache cache = model.new_cache(int64_t(prompt.size()) + o.max_new_tokens);
  Tensor logits = model.forward_cached(prompt, cache);
  while (!take_step(model, logits, o, r)) logits = model.forward_cached({r.tokens.back()}, cache);
  return r;
}

GenerateResult generate_uncached(LlamaModel& model, const std::vector<int32_t>& prompt, const GenerateOptions& o) {
  check_prompt(model, prompt, o);
  GenerateResult r;
  if (o.max_new_tokens == 0) return r;
  std::vector<int32_t> seq = prompt;
  for (;;) {
    const int64_t n = int64_t(seq.size());
    std::vector<int32_t> pos(static_cast<size_t>(n));
    std::iota(pos.begin(), pos.end(), 0);
    Batch b;
    b.input_ids = Tensor::from_i32({n}, seq);
    b.labels = Tensor::from_i32({n}, std::vector<int32_t>(size_t(n), -100));
    b.positions = Tensor::from_i32({n}, pos);
    b.cu_seqlens = Tensor::from_i32({2}, {0, int32_t(n)});
    b.seq_lens = Tensor::from_i32({1}, {int32_t(n)});
    b.max_seqlen = int32_t(n);
    b.num_real_tokens = n;
    Tensor logits = model.logits(b.to(model.device()));
    if (take_step(model, logits, o, r)) break;
    seq.push_back(r.tokens.back());
  }
  return r;
}

}  // namespace biofm
