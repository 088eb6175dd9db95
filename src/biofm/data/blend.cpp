#include "biofm/data/blend.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "biofm/core/error.h"
#include "biofm/data/sampler.h"

namespace biofm {

BlendCorpus::BlendCorpus(std::vector<std::unique_ptr<SequenceCorpus>> sources, std::vector<double> weights,
                         std::vector<std::string> names, uint64_t seed)
    : sources_(std::move(sources)), weights_(std::move(weights)), names_(std::move(names)), seed_(seed) {
  if (sources_.empty() || sources_.size() != weights_.size() || names_.size() != sources_.size())
    fail("blend: ", sources_.size(), " sources, ", weights_.size(), " weights and ", names_.size(), " names");
  double total_w = 0;
  uint64_t total_n = 0;
  for (size_t s = 0; s < sources_.size(); ++s) {
    if (!(weights_[s] >= 0 && std::isfinite(weights_[s]))) fail("blend: weight ", weights_[s], " of ", names_[s]);
    if (weights_[s] > 0 && sources_[s]->empty()) fail("blend: source ", names_[s], " holds no records");
    if (sources_[s]->clustered())
      fail("blend: source ", names_[s], " samples by cluster, which a blend does not support (set "
           "dataset.cluster_sampling=false)");
    total_w += weights_[s];
    total_n += sources_[s]->size();
  }
  if (!(total_w > 0)) fail("blend: the weights are all 0");
  first_.push_back(0);
  for (size_t s = 0; s < sources_.size(); ++s) {
    uint64_t n = 0;
    if (weights_[s] > 0) n = std::max<uint64_t>(1, uint64_t(std::llround(weights_[s] / total_w * double(total_n))));
    first_.push_back(first_.back() + n);
  }
}

std::pair<size_t, uint64_t> BlendCorpus::locate(uint64_t i) const {
  BIOFM_CHECK(i < size(), "blend record ", i, " of ", size());
  const size_t s = size_t(std::upper_bound(first_.begin(), first_.end(), i) - first_.begin()) - 1;
  const uint64_t j = i - first_[s], n = sources_[s]->size();
  // Each source has its own key: seed mixed with the source index (golden-ratio increment).
  const uint64_t key = seed_ + 0x9E3779B97F4A7C15ull * (uint64_t(s) + 1);
  return {s, permute_index(j % n, n, key, j / n)};
}

uint64_t BlendCorpus::length(uint64_t i) const {
  auto [s, r] = locate(i);
  return sources_[s]->length(r);
}

uint64_t BlendCorpus::append_tokens(uint64_t i, uint64_t start, uint64_t n, const Tokenizer& tok,
                                    std::vector<int32_t>& out) const {
  auto [s, r] = locate(i);
  return sources_[s]->append_tokens(r, start, n, tok, out);
}

uint64_t BlendCorpus::skipped_records() const {
  uint64_t n = 0;
  for (const auto& s : sources_) n += s->skipped_records();
  return n;
}

std::string BlendCorpus::summary() const {
  std::ostringstream os;
  os << "blend of " << sources_.size() << " sources, " << size() << " samples per epoch:";
  for (size_t s = 0; s < sources_.size(); ++s)
    os << (s ? ";" : "") << " " << names_[s] << " (weight " << weights_[s] << ", " << slots(s) << " samples from "
       << sources_[s]->summary() << ")";
  return os.str();
}

}  // namespace biofm
