#include "biofm/infer/shards.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "biofm/core/error.h"
#include "biofm/io/atomic_file.h"
#include "biofm/io/safetensors.h"

namespace biofm::infer {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

ShardedOutput::ShardedOutput(std::string path, RunKey run_key, int64_t shard_size, int64_t total_records)
    : path_(std::move(path)), run_key_(std::move(run_key)), single_(ends_with(path_, ".safetensors")),
      chunk_(single_ ? std::max<int64_t>(1, total_records) : shard_size), total_(total_records) {
  if (chunk_ <= 0) fail("--shard-size must be positive, got ", shard_size);
  if (!single_) make_dirs_writable(path_);
}

std::string ShardedOutput::shard_path(int64_t first) const {
  if (single_) return path_;
  char name[64];
  std::snprintf(name, sizeof name, "shard-%05lld.safetensors", (long long)(first / chunk_));
  return (fs::path(path_) / name).string();
}

bool ShardedOutput::have(int64_t first, int64_t n, std::map<std::string, std::string>* metadata) const {
  if (single_) return false;
  const std::string p = shard_path(first);
  if (!fs::exists(p)) return false;
  MappedSafetensors f(p);
  const auto& m = f.metadata();
  auto get = [&](const char* k) { return m.count(k) ? m.at(k) : std::string(); };
  if (!run_key_.matches(get("run")))
    fail(p, " was written by a different command (", get("run"), "); now: ", run_key_.str(),
         ". Use another --output directory or remove it");
  if (get("first_record") != std::to_string(first) || get("num_records") != std::to_string(n))
    fail(p, " holds records ", get("first_record"), " + ", get("num_records"), ", expected ", first, " + ", n,
         " (was --shard-size changed?)");
  if (metadata) *metadata = m;
  return true;
}

void ShardedOutput::write(int64_t first, int64_t n, const std::map<std::string, Tensor>& tensors,
                          const std::string& names_json, std::map<std::string, std::string> metadata) const {
  metadata["names"] = names_json;
  metadata["run"] = run_key_.str();
  metadata["first_record"] = std::to_string(first);
  metadata["num_records"] = std::to_string(n);
  write_safetensors(shard_path(first), tensors, metadata);
}

void ShardedOutput::finish(const std::string& summary_json) const {
  if (single_) return;
  nlohmann::json shards = nlohmann::json::array();
  for (int64_t first = 0; first < total_; first += chunk_)
    shards.push_back({{"file", fs::path(shard_path(first)).filename().string()},
                      {"first_record", first},
                      {"num_records", std::min(chunk_, total_ - first)}});
  nlohmann::json index = {{"num_records", total_}, {"shard_size", chunk_}, {"run", run_key_.str()}, {"shards", shards}};
  index["summary"] = nlohmann::json::parse(summary_json);
  write_file_atomic((fs::path(path_) / "index.json").string(),
                    index.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace biofm::infer
