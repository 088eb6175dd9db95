#include "biofm/infer/batching.h"

#include <algorithm>
#include <numeric>

namespace biofm::infer {

std::vector<std::vector<int64_t>> plan_batches(const std::vector<int64_t>& lengths, int64_t max_tokens) {
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lengths[size_t(a)] > lengths[size_t(b)]; });
  std::vector<std::vector<int64_t>> batches;
  int64_t tokens = 0;
  for (int64_t i : order) {
    const int64_t n = lengths[size_t(i)];
    if (batches.empty() || tokens + n > max_tokens) {
      batches.emplace_back();
      tokens = 0;
    }
    batches.back().push_back(i);
    tokens += n;
  }
  return batches;
}

std::vector<BatchShape> batch_shapes(const std::vector<std::vector<int64_t>>& plan, const std::vector<int64_t>& lengths) {
  std::vector<BatchShape> shapes;
  for (const std::vector<int64_t>& members : plan) {
    BatchShape s;
    s.sequences = int64_t(members.size());
    bool same = true;
    for (int64_t i : members) {
      const int64_t t = lengths[size_t(i)];
      same = same && (s.rows == 0 || t == s.max_seqlen);
      s.rows += t;
      s.max_seqlen = std::max(s.max_seqlen, int32_t(t));
    }
    s.uniform = same && s.sequences > 0;  // back to back, no padding rows
    shapes.push_back(s);
  }
  return shapes;
}

std::vector<KeptWindow> kept_windows(uint64_t length, int64_t window_tokens, int64_t stride, bool causal) {
  const std::vector<Window> w = make_windows(length, window_tokens, stride);
  std::vector<KeptWindow> out(w.size());
  for (size_t j = 0; j < w.size(); ++j) {
    out[j].start = w[j].start;
    out[j].length = w[j].length;
    out[j].keep_begin = w[j].start;
    out[j].keep_end = w[j].start + w[j].length;
  }
  for (size_t j = 1; j < out.size(); ++j) {
    const uint64_t overlap_begin = out[j].start, overlap_end = out[j - 1].start + out[j - 1].length;
    if (overlap_end <= overlap_begin) continue;
    const uint64_t cut = causal ? overlap_end : overlap_begin + (overlap_end - overlap_begin + 1) / 2;
    out[j - 1].keep_end = cut;
    out[j].keep_begin = cut;
  }
  return out;
}

}  // namespace biofm::infer
