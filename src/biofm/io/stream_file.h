// Files read and written without whole-file copies in memory: a read-only memory mapping
// whose pages can be handed back as they are consumed, and an atomic writer (temporary name,
// fsync, rename) that computes the CRC32 and size of what it writes as it goes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace biofm {

// Bytes processed between page releases when streaming over a mapping (and the largest host
// staging buffer the checkpoint code allocates).
constexpr size_t kStreamChunkBytes = size_t(16) << 20;

uint32_t crc32_update(uint32_t crc, const void* data, size_t n);  // start with crc = 0

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws naming the path
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the mapped pages of [offset, offset+n) from this process's memory (they stay in the
  // page cache; a later access reads them again), so streaming over a large file keeps the
  // resident set bounded.
  void release(size_t offset, size_t n) const;
  // CRC32 of the whole file, streamed in chunks that are released as they are read.
  uint32_t crc32() const;

 private:
  std::string path_;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);  // opens path.tmp.<pid>
  ~AtomicFileWriter();                                  // removes the temporary if not committed
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t n);
  // fsync, close, rename over the final path.
  void commit();
  uint64_t bytes() const { return bytes_; }
  uint32_t crc32() const { return crc_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  uint32_t crc_ = 0;
};

// Removes the temporaries (NAME.tmp.<pid>, of AtomicFileWriter and write_file_atomic) that a
// process that died left in `dir` (not recursive); those of live processes (and this one's) stay.
// Returns how many were removed.
uint64_t remove_stale_temporaries(const std::string& dir);

// Size and CRC32 of a written or verified file.
struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

}  // namespace biofm
