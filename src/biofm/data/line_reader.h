// LineReader: lines of any length from a plain, gzip or zstd file (the readers' input layer).
//
// The compression is told from the file's first bytes, not its name: gzip and plain text go
// through zlib (gzread reads uncompressed files transparently), zstd through libzstd's
// streaming decoder. Without libzstd at build time (BIOFM_WITH_ZSTD undefined) a zstd file
// is an error saying so. Concatenated gzip members and zstd frames are read as one stream.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace biofm {

enum class Compression { None, Gzip, Zstd };
// From the magic bytes; None for anything else (a missing file included).
Compression sniff_compression(const std::string& path);
bool zstd_supported();  // built with libzstd

class LineReader {
 public:
  // Throws naming the path: missing file, a directory, a zstd file without zstd support.
  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Next line without its '\n' (and without a trailing '\r'); false at end of file. Throws on
  // corrupt or truncated compressed data.
  bool getline(std::string& line);

  uint64_t line_no() const { return line_no_; }
  const std::string& path() const { return path_; }

  // Decompressed bytes: read() fills up to n bytes, 0 only at the end of the stream.
  struct Source {
    virtual ~Source() = default;
    virtual size_t read(char* buf, size_t n) = 0;
  };

 private:
  bool fill();

  std::string path_;
  std::unique_ptr<Source> src_;
  // Not zero-filled: only what the source writes is read (a reader per small file stays cheap).
  static constexpr size_t kBufferBytes = size_t(1) << 16;
  std::unique_ptr<char[]> buf_ = std::make_unique_for_overwrite<char[]>(kBufferBytes);
  size_t pos_ = 0, len_ = 0;
  bool eof_ = false;
  uint64_t line_no_ = 0;
};

}  // namespace biofm
