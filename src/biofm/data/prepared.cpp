#include "biofm/data/prepared.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "biofm/core/error.h"
#include "biofm/core/rng.h"
#include "biofm/data/dataset.h"
#include "biofm/io/atomic_file.h"

namespace biofm {

std::string tokenizer_name(const Tokenizer& tok) {
  if (&tok == &esm_tokenizer()) return "esm";
  if (&tok == &nucleotide_tokenizer()) return "nucleotide";
  fail("prepared datasets support the esm and nucleotide tokenizers only");
}

const Tokenizer& tokenizer_named(const std::string& name) {
  if (name == "esm") return esm_tokenizer();
  if (name == "nucleotide") return nucleotide_tokenizer();
  fail("unknown tokenizer '", name, "' (esm | nucleotide)");
}

bool is_prepared_dir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::is_regular_file(std::filesystem::path(path) / kPreparedManifest, ec);
}

PreparedCorpus::PreparedCorpus(const std::string& dir, const PreparedOpenOptions& o) : dir_(dir), split_(o.split) {
  const std::string mpath = (std::filesystem::path(dir) / kPreparedManifest).string();
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(read_file(mpath));
    if (m.value("format", "") != "biofm-prepared") fail("not a biofm prepared-dataset manifest");
    if (m.at("format_version").get<int>() != kPreparedFormatVersion)
      fail("format_version ", m.at("format_version").get<int>(), " (this biofm reads ", kPreparedFormatVersion, ")");
    tokenizer_ = m.at("tokenizer").get<std::string>();
    (void)tokenizer_named(tokenizer_);
    if (!m.at("splits").contains(split_))
      fail("no split '", split_, "' (splits: ", m.at("splits").dump(), ")");
  } catch (const nlohmann::json::exception& e) {
    fail(mpath, ": ", e.what());
  } catch (const Error& e) {
    fail(mpath, ": ", e.what());
  }
  const nlohmann::json& split = m["splits"][split_];
  skipped_ = m.value("skipped_records", uint64_t(0));
  first_.push_back(0);
  std::vector<uint32_t> want_crc;
  for (const auto& s : split.at("shards")) {
    const std::string file = s.at("file").get<std::string>();
    const std::string path = (std::filesystem::path(dir) / file).string();
    if (!std::filesystem::exists(path)) fail("prepared dataset ", dir, ": shard ", file, " is missing");
    ShardView v(path);
    const uint64_t bytes = s.at("bytes").get<uint64_t>(), records = s.at("records").get<uint64_t>();
    if (v.file_bytes() != bytes || v.records() != records)
      fail("corrupt shard ", path, ": ", v.file_bytes(), " bytes and ", v.records(), " records, the manifest says ",
           bytes, " and ", records);
    want_crc.push_back(s.at("crc32").get<uint32_t>());
    records_ += v.records();
    tokens_ += v.tokens();
    first_.push_back(records_);
    shards_.push_back(std::move(v));
  }
  if (records_ == 0) fail("prepared dataset ", dir, ": split '", split_, "' holds no records");
  seed_ = o.seed;
  uint32_t clusters_crc = 0;
  if (o.cluster_sampling && split.contains("clusters")) {
    const nlohmann::json& c = split["clusters"];
    const std::string path = (std::filesystem::path(dir) / c.at("file").get<std::string>()).string();
    if (!std::filesystem::exists(path)) fail("prepared dataset ", dir, ": cluster index ", c.at("file").get<std::string>(), " is missing");
    clusters_ = std::make_unique<ClusterIndex>(path, records_);
    if (clusters_->clusters() != c.at("clusters").get<uint64_t>())
      fail("corrupt cluster index ", path, ": ", clusters_->clusters(), " clusters, the manifest says ", c.at("clusters"));
    clusters_crc = c.at("crc32").get<uint32_t>();
  }
  if (o.verify_checksums && o.verify_in_background)
    verifier_ = std::thread([this, want = std::move(want_crc), clusters_crc]() mutable { verify(std::move(want), clusters_crc); });
  else if (o.verify_checksums)
    verify(std::move(want_crc), clusters_crc), check_verified();
}

PreparedCorpus::~PreparedCorpus() {
  stop_ = true;
  if (verifier_.joinable()) verifier_.join();
}

void PreparedCorpus::verify(std::vector<uint32_t> want, uint32_t clusters_crc) {
  if (clusters_ && clusters_->crc32() != clusters_crc) {
    bad_shard_ = -2;
    return;
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t s; !stop_ && (s = next++) < shards_.size();)
      if (shards_[s].crc32() != want[s]) {
        int64_t none = -1;
        bad_shard_.compare_exchange_strong(none, int64_t(s));
      }
  };
  const size_t threads = std::min<size_t>(shards_.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
}

void PreparedCorpus::wait_verified() {
  if (verifier_.joinable()) verifier_.join();
  check_verified();
}

void PreparedCorpus::fail_corrupt() const {
  if (bad_shard_.load() == -2) fail("corrupt cluster index ", clusters_->path(), ": CRC32 does not match the manifest");
  fail("corrupt shard ", shards_[size_t(bad_shard_.load())].path(), ": CRC32 does not match the manifest");
}

std::pair<const ShardView*, uint64_t> PreparedCorpus::locate(uint64_t i) const {
  BIOFM_CHECK(i < records_, "record ", i, " of ", records_);
  check_verified();
  const size_t s = size_t(std::upper_bound(first_.begin(), first_.end(), i) - first_.begin()) - 1;
  return {&shards_[s], i - first_[s]};
}

uint64_t PreparedCorpus::length(uint64_t i) const {
  auto [shard, r] = locate(i);
  return shard->length(r);
}

uint64_t PreparedCorpus::append_tokens(uint64_t i, uint64_t start, uint64_t n, const Tokenizer& tok,
                                       std::vector<int32_t>& out) const {
  auto [shard, r] = locate(i);
  const auto ids = shard->record(r);
  BIOFM_CHECK(start + n <= ids.size(), "tokens [", start, ", ", start + n, ") of a record of ", ids.size());
  const int32_t unk = tok.unk_id(), vocab = tok.vocab_size();
  uint64_t unknown = 0;
  const size_t base = out.size();
  out.resize(base + n);
  for (uint64_t t = 0; t < n; ++t) {
    const int32_t id = ids[start + t];
    if (id >= vocab) fail("corrupt shard ", shard->path(), ": record ", r, " holds token id ", id);
    unknown += id == unk;
    out[base + t] = id;
  }
  return unknown;
}

std::string prepared_residue_chars(const Tokenizer& tok) {
  std::string text_of(size_t(tok.vocab_size()), '\0');
  char unk = 0;
  for (char cand : {'?', '\x03'}) {
    std::vector<int32_t> ids;
    tok.encode_residues(std::string_view(&cand, 1), ids);
    if (ids.size() == 1 && ids[0] == tok.unk_id()) {
      unk = cand;
      break;
    }
  }
  BIOFM_CHECK(unk != 0, "no character maps to <unk>");
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    const std::string t = tok.decode({id});
    text_of[size_t(id)] = id == tok.unk_id() || t.size() != 1 ? unk : t[0];
  }
  return text_of;
}

void require_prepared_tokenizer(const PreparedCorpus& c, const std::string& dir, const Tokenizer& expected,
                                const std::string& user) {
  const std::string want = tokenizer_name(expected);
  if (c.tokenizer() != want)
    fail("prepared dataset ", dir, " was tokenized with the ", c.tokenizer(), " tokenizer, but ", user, " uses the ",
         want, " tokenizer (prepare it again with biofm prepare --family for that model)");
}

SequenceDataset read_prepared_split(const std::string& dir, const std::string& split, const Tokenizer& expected) {
  PreparedOpenOptions o;
  o.split = split;
  o.cluster_sampling = false;
  PreparedCorpus c(dir, o);
  require_prepared_tokenizer(c, dir, expected, "the model");
  const Tokenizer& tok = expected;
  // One character per id: the residue's, or for <unk> one that encodes back to <unk>.
  const std::string text_of = prepared_residue_chars(tok);
  SequenceDataset ds;
  std::vector<int32_t> ids;
  std::string seq;
  for (uint64_t i = 0; i < c.records(); ++i) {
    ids.clear();
    c.append_tokens(i, 0, c.length(i), tok, ids);
    seq.resize(ids.size());
    for (size_t t = 0; t < ids.size(); ++t) seq[t] = text_of[size_t(ids[t])];
    ds.add(seq, split + ":" + std::to_string(i));
  }
  return ds;
}

uint64_t PreparedCorpus::resolve(uint64_t sample, uint64_t epoch) const {
  if (!clusters_) return sample;
  const uint64_t n = clusters_->cluster_size(sample);
  const uint64_t j = n == 1 ? 0 : rng_below(seed_, RngStream::Cluster, sample, uint32_t(epoch), uint32_t(std::min<uint64_t>(n, UINT32_MAX)));
  return clusters_->member(sample, j);
}

std::string PreparedCorpus::summary() const {
  std::string s = std::to_string(records_) + " sequences (" + std::to_string(tokens_) + " tokens) in " +
                  std::to_string(shards_.size()) + (shards_.size() == 1 ? " shard" : " shards") + ", split " + split_;
  if (clusters_) s += "; " + std::to_string(clusters_->clusters()) + " clusters, one member each per epoch";
  return s;
}

}  // namespace biofm
