#include "biofm/infer/fingerprint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "biofm/core/error.h"
#include "biofm/core/hash.h"
#include "biofm/models/hf_dir.h"

namespace biofm::infer {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kSeparator("\0", 1);

uint64_t sampled_file_hash(const std::string& path, uint64_t h) {
  constexpr uint64_t kPiece = 4096, kPieces = 64;
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) fail("cannot read the size of ", path, ": ", ec.message());
  h = fnv1a(fs::path(path).filename().string(), h);
  h = mix64(h ^ size);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open ", path);
  std::vector<char> buf(kPiece);
  const uint64_t last = size > kPiece ? size - kPiece : 0;
  for (uint64_t i = 0; i < kPieces; ++i) {
    const uint64_t at = last * i / (kPieces - 1);  // 0 .. last, evenly
    const uint64_t n = std::min(kPiece, size - std::min(size, at));
    in.seekg(std::streamoff(at));
    in.read(buf.data(), std::streamsize(n));
    if (uint64_t(in.gcount()) != n) fail("cannot read ", path, " (", n, " bytes at ", at, ")");
    h = fnv1a(std::string_view(buf.data(), n), h);
    if (size <= kPiece) break;  // (one piece is the whole file)
  }
  return h;
}

}  // namespace

uint64_t model_dir_fingerprint(const std::string& dir) {
  const HfDirContents hf = read_hf_dir(dir);
  uint64_t h = fnv1a(hf.config_json);
  std::vector<std::string> files = hf.weight_files;
  files.insert(files.end(), hf.flat_shard_files.begin(), hf.flat_shard_files.end());
  if (!hf.index_path.empty()) files.push_back(hf.index_path);
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) h = sampled_file_hash(f, h);
  return mix64(h);
}

void RecordsFingerprint::add(std::string_view name, std::string_view sequence) {
  h_ = fnv1a(kSeparator, fnv1a(name, h_));
  h_ = fnv1a(kSeparator, fnv1a(sequence, h_));
  ++records_;
}

uint64_t RecordsFingerprint::value() const { return mix64(h_ ^ mix64(records_)); }

}  // namespace biofm::infer
