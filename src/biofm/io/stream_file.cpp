#include "biofm/io/stream_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "biofm/core/error.h"

namespace biofm {

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  const Bytef* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (n > 0) {
    const uInt k = uInt(std::min<size_t>(n, 1u << 30));
    c = ::crc32(c, p, k);
    p += k;
    n -= k;
  }
  return uint32_t(c);
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail("cannot open '", path, "': ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    fail("cannot stat '", path, "': ", std::strerror(e));
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      fail("cannot map '", path, "': ", std::strerror(e));
    }
    data_ = static_cast<const char*>(p);
    ::madvise(p, size_, MADV_SEQUENTIAL);
  }
  ::close(fd);  // the mapping stays valid
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<char*>(data_), size_);
}

void MappedFile::release(size_t offset, size_t n) const {
  if (!data_ || n == 0 || offset >= size_) return;
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t start = offset / page * page;
  const size_t end = std::min(size_, offset + n);
  ::madvise(const_cast<char*>(data_) + start, end - start, MADV_DONTNEED);
}

uint32_t MappedFile::crc32() const {
  uint32_t crc = 0;
  for (size_t off = 0; off < size_; off += kStreamChunkBytes) {
    const size_t n = std::min(kStreamChunkBytes, size_ - off);
    crc = crc32_update(crc, data_ + off, n);
    release(off, n);
  }
  return crc;
}

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), tmp_(path + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd_ < 0) fail("cannot write '", path, "': ", std::strerror(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFileWriter::write(const void* data, size_t n) {
  if (fd_ < 0) fail("writing '", path_, "' after it was committed");
  crc_ = crc32_update(crc_, data, n);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t k = ::write(fd_, p, std::min<size_t>(n, size_t(1) << 30));
    if (k < 0) {
      if (errno == EINTR) continue;
      fail("writing '", path_, "' failed: ", std::strerror(errno));
    }
    p += k;
    n -= size_t(k);
    bytes_ += uint64_t(k);
  }
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) fail("'", path_, "' committed twice");
  const int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp_.c_str());
    fail("writing '", path_, "' failed: ", std::strerror(e));
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp_.c_str());
    fail("cannot rename into '", path_, "': ", std::strerror(e));
  }
}

uint64_t remove_stale_temporaries(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  uint64_t removed = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || at + 5 == name.size() || !e.is_regular_file(ec)) continue;
    const std::string digits = name.substr(at + 5);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const long pid = std::strtol(digits.c_str(), nullptr, 10);
    if (pid <= 0 || pid == long(::getpid()) || ::kill(pid_t(pid), 0) == 0 || errno == EPERM) continue;  // alive
    removed += fs::remove(e.path(), ec);
  }
  return removed;
}

}  // namespace biofm
