#include "biofm/data/line_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#ifdef BIOFM_WITH_ZSTD
#include <zstd.h>
#endif

#include "biofm/core/error.h"

namespace biofm {

namespace {

// Plain text and gzip, both through zlib.
class GzSource : public LineReader::Source {
 public:
  explicit GzSource(const std::string& path) : path_(path) {
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    if (!file_) fail("cannot open ", path, ": ", errno ? std::strerror(errno) : "gzopen failed");
    gzbuffer(file_, 1 << 16);
  }
  ~GzSource() override { gzclose(file_); }

  size_t read(char* buf, size_t n) override {
    int got = gzread(file_, buf, unsigned(n));
    int err = 0;
    const char* msg = gzerror(file_, &err);
    if (got < 0) fail("error reading ", path_, ": ", msg ? msg : "gzread failed");
    if (got == 0 && err != Z_OK && err != Z_STREAM_END)
      fail("error reading ", path_, " (corrupt or truncated gzip?): ", msg ? msg : "");
    return size_t(got);
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

#ifdef BIOFM_WITH_ZSTD
class ZstdSource : public LineReader::Source {
 public:
  explicit ZstdSource(const std::string& path) : path_(path), in_(ZSTD_DStreamInSize()) {
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_) fail("cannot open ", path, ": ", std::strerror(errno));
    dctx_ = ZSTD_createDCtx();
    if (!dctx_) fail("cannot read ", path, ": ZSTD_createDCtx failed");
  }
  ~ZstdSource() override {
    ZSTD_freeDCtx(dctx_);
    std::fclose(file_);
  }

  size_t read(char* buf, size_t n) override {
    ZSTD_outBuffer out{buf, n, 0};
    for (;;) {
      if (ib_.pos == ib_.size && !file_eof_) {
        size_t got = std::fread(in_.data(), 1, in_.size(), file_);
        if (got == 0 && std::ferror(file_)) fail("error reading ", path_, ": ", std::strerror(errno));
        if (got == 0) file_eof_ = true;
        ib_ = {in_.data(), got, 0};
      }
      const bool input_done = ib_.pos == ib_.size && file_eof_;
      // pending_ == 0: the last frame is complete and flushed, so the end is clean.
      if (input_done && pending_ == 0) return out.pos;
      size_t r = ZSTD_decompressStream(dctx_, &out, &ib_);
      if (ZSTD_isError(r)) fail("error reading ", path_, " (corrupt zstd?): ", ZSTD_getErrorName(r));
      pending_ = r;
      if (out.pos > 0) return out.pos;
      if (input_done && r != 0) fail("error reading ", path_, ": truncated zstd stream");
    }
  }

 private:
  std::string path_;
  FILE* file_ = nullptr;
  ZSTD_DCtx* dctx_ = nullptr;
  std::vector<char> in_;
  ZSTD_inBuffer ib_{nullptr, 0, 0};
  size_t pending_ = 0;
  bool file_eof_ = false;
};
#endif

}  // namespace

Compression sniff_compression(const std::string& path) {
  unsigned char m[4] = {0, 0, 0, 0};
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Compression::None;
  size_t n = std::fread(m, 1, sizeof m, f);
  std::fclose(f);
  if (n >= 2 && m[0] == 0x1f && m[1] == 0x8b) return Compression::Gzip;
  if (n == 4 && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd) return Compression::Zstd;
  return Compression::None;
}

bool zstd_supported() {
#ifdef BIOFM_WITH_ZSTD
  return true;
#else
  return false;
#endif
}

LineReader::LineReader(const std::string& path) : path_(path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail("cannot open ", path, ": no such file");
  if (fs::is_directory(st)) fail("cannot open ", path, ": is a directory");
  if (sniff_compression(path) == Compression::Zstd) {
#ifdef BIOFM_WITH_ZSTD
    src_ = std::make_unique<ZstdSource>(path);
#else
    fail("cannot read ", path, ": it is zstd-compressed and this biofm was built without zstd "
         "(install libzstd-dev and rebuild, or decompress it with `zstd -d`)");
#endif
  } else {
    src_ = std::make_unique<GzSource>(path);
  }
}

LineReader::~LineReader() = default;

bool LineReader::getline(std::string& line) {
  line.clear();
  bool any = false;
  for (;;) {
    if (pos_ == len_ && !fill()) break;
    any = true;
    const char* start = buf_.get() + pos_;
    const char* nl = static_cast<const char*>(std::memchr(start, '\n', len_ - pos_));
    if (nl) {
      line.append(start, size_t(nl - start));
      pos_ += size_t(nl - start) + 1;
      ++line_no_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return true;
    }
    line.append(start, len_ - pos_);
    pos_ = len_;
  }
  if (!any) return false;
  ++line_no_;  // last line without a newline
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

bool LineReader::fill() {
  if (eof_) return false;
  size_t n = src_->read(buf_.get(), kBufferBytes);
  if (n == 0) {
    eof_ = true;
    return false;
  }
  pos_ = 0;
  len_ = n;
  return true;
}

}  // namespace biofm
