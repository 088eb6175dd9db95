// Helpers shared by the data tests.
#pragma once
#include <gtest/gtest.h>
#include <zlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#ifdef BIOFM_WITH_ZSTD
#include <zstd.h>
#endif

#include "biofm/core/error.h"
#include "biofm/data/batch.h"

namespace biofm::testing {

inline std::string source_path(const std::string& rel) { return std::string(BIOFM_SOURCE_DIR) + "/" + rel; }

// A fresh directory under the system temp dir, removed when the object dies.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           ("biofm_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::string write(const std::string& name, const std::string& text) const {
    std::string p = file(name);
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  std::string write_gz(const std::string& name, const std::string& text) const {
    std::string p = file(name);
    gzFile f = gzopen(p.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(gzwrite(f, text.data(), unsigned(text.size())), int(text.size()));
    gzclose(f);
    return p;
  }
#ifdef BIOFM_WITH_ZSTD
  // Each part becomes its own zstd frame (readers must read concatenated frames as one stream).
  std::string write_zst(const std::string& name, const std::vector<std::string>& parts, int level = 3) const {
    std::string out;
    for (const auto& text : parts) {
      std::string frame(ZSTD_compressBound(text.size()), '\0');
      size_t n = ZSTD_compress(frame.data(), frame.size(), text.data(), text.size(), level);
      EXPECT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
      out.append(frame.data(), n);
    }
    return write(name, out);
  }
#endif
};

// The message of the biofm::Error that `fn` throws ("" and a test failure if none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const biofm::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a biofm::Error";
  return "";
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

inline std::vector<int32_t> to_vec(const Tensor& t) {
  const int32_t* p = t.i32();
  return std::vector<int32_t>(p, p + t.numel());
}

// Structural checks every batch must pass.
inline void check_batch_layout(const Batch& b, int32_t pad_id) {
  auto ids = to_vec(b.input_ids), labels = to_vec(b.labels), pos = to_vec(b.positions);
  auto cu = to_vec(b.cu_seqlens), lens = to_vec(b.seq_lens);
  const int64_t B = int64_t(lens.size()), T = int64_t(ids.size());
  ASSERT_GT(B, 0);
  ASSERT_EQ(int64_t(cu.size()), B + 1);
  ASSERT_EQ(int64_t(labels.size()), T);
  ASSERT_EQ(int64_t(pos.size()), T);
  EXPECT_EQ(cu[0], 0);
  EXPECT_EQ(cu[B], T);
  int64_t real = 0, nlab = 0;
  int32_t mx = 0;
  for (int64_t s = 0; s < B; ++s) {
    ASSERT_GE(cu[s + 1] - cu[s], lens[s]) << "sequence " << s;
    ASSERT_GT(lens[s], 0);
    for (int32_t t = 0; t < cu[s + 1] - cu[s]; ++t) {
      size_t row = size_t(cu[s] + t);
      if (t < lens[s]) {
        EXPECT_EQ(pos[row], t);
      } else {
        EXPECT_EQ(ids[row], pad_id);
        EXPECT_EQ(labels[row], -100);
        EXPECT_EQ(pos[row], 0);
      }
    }
    real += lens[s];
    mx = std::max(mx, lens[s]);
  }
  for (int32_t l : labels) nlab += l != -100;
  EXPECT_EQ(b.num_real_tokens, real);
  EXPECT_EQ(b.num_label_tokens, nlab);
  EXPECT_EQ(b.max_seqlen, mx);
}

inline bool same_batch(const Batch& a, const Batch& b) {
  return to_vec(a.input_ids) == to_vec(b.input_ids) && to_vec(a.labels) == to_vec(b.labels) &&
         to_vec(a.positions) == to_vec(b.positions) && to_vec(a.cu_seqlens) == to_vec(b.cu_seqlens) &&
         to_vec(a.seq_lens) == to_vec(b.seq_lens) && a.max_seqlen == b.max_seqlen &&
         a.num_real_tokens == b.num_real_tokens && a.num_label_tokens == b.num_label_tokens;
}

}  // namespace biofm::testing
