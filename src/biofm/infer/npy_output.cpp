#include "biofm/infer/npy_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "biofm/core/error.h"
#include "biofm/io/atomic_file.h"
#include "biofm/io/stream_file.h"

namespace biofm::infer {

namespace fs = std::filesystem;

std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dims;  // Python's tuple syntax: "(3,)", "(3, 4)"
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // magic (6) + version (2) + header length (2) + dict + padding + '\n', a multiple of 64
  const size_t unpadded = 10 + dict.size() + 1;
  const size_t total = (unpadded + 63) / 64 * 64;
  if (total - 10 > 65535) fail("npy header too long (", dict.size(), " bytes)");
  dict.append(total - unpadded, ' ');
  dict += '\n';
  const uint16_t len = uint16_t(dict.size());
  std::string h("\x93NUMPY\x01\x00", 8);
  h += char(len & 0xff);
  h += char(len >> 8);
  return h + dict;
}

namespace {

const char* numpy_descr(DType dt) {
  switch (dt) {
    case DType::F32: return "<f4";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    default: return nullptr;
  }
}

void pwrite_all(int fd, const char* p, size_t n, int64_t offset, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, off_t(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("cannot write ", path, ": ", std::strerror(w < 0 ? errno : ENOSPC));
    p += w;
    n -= size_t(w);
    offset += w;
  }
}

}  // namespace

NpyOutput::NpyOutput(std::string dir, RunKey run_key, int64_t piece_records, int64_t total_records)
    : dir_(std::move(dir)), run_key_(std::move(run_key)), chunk_(piece_records), total_(total_records) {
  if (chunk_ <= 0) fail("--shard-size must be positive, got ", piece_records);
  make_dirs_writable(dir_);
  const fs::path progress = fs::path(dir_) / "progress.json";
  if (!fs::exists(progress)) return;
  nlohmann::json p;
  try {
    p = nlohmann::json::parse(read_file(progress.string()));
  } catch (const nlohmann::json::exception& e) {
    fail(progress.string(), ": unreadable (", e.what(), "); remove it to start over");
  }
  const std::string run = p.value("run", std::string());
  if (!run_key_.matches(run))
    fail(dir_, " holds arrays written by a different command (", run, "); now: ", run_key_.str(),
         ". Use another --output directory or remove it");
  if (p.value("piece_records", int64_t(0)) != chunk_)
    fail(dir_, " was written with --shard-size ", p.value("piece_records", int64_t(0)), ", now ", chunk_);
  for (const auto& [name, a] : p.at("arrays").items()) {
    Array arr;
    arr.descr = a.at("descr").get<std::string>();
    arr.shape = a.at("shape").get<std::vector<int64_t>>();
    arr.row_bytes = a.at("row_bytes").get<int64_t>();
    arr.data_offset = a.at("data_offset").get<int64_t>();
    const int64_t want = arr.data_offset + arr.row_bytes * total_;
    std::error_code ec;
    const auto size = fs::file_size(file_of(name), ec);
    if (ec || int64_t(size) != want)
      fail(file_of(name), ": missing or not ", want, " bytes as progress.json says; remove ", dir_, " to start over");
    arrays_[name] = arr;
  }
  done_ = p.at("done").get<std::vector<int64_t>>();
}

std::string NpyOutput::file_of(const std::string& tensor) const {
  return (fs::path(dir_) / (tensor + ".npy")).string();
}

bool NpyOutput::have(int64_t first, int64_t /*n*/) const {
  return std::find(done_.begin(), done_.end(), first) != done_.end();
}

void NpyOutput::write(int64_t first, int64_t n, const std::map<std::string, Tensor>& tensors) {
  for (const auto& [name, t0] : tensors) {
    const Tensor t = t0.dtype() == DType::BF16 ? t0.to(DType::F32) : t0;
    const char* descr = numpy_descr(t.dtype());
    if (!descr) fail("npy output: ", name, " has dtype ", t.describe(), ", which .npy output does not take");
    if (t.dim() < 1 || t.size(0) != n)
      fail("npy output: ", name, " must have one row per record (", n, "), got ", t.describe(),
           "; per-token outputs are ragged: use safetensors output (--output-format safetensors)");
    std::vector<int64_t> shape = t.shape();
    shape[0] = total_;
    const int64_t row_bytes = t.numel() / std::max<int64_t>(n, 1) * int64_t(dtype_size(t.dtype()));
    const std::string path = file_of(name);
    auto it = arrays_.find(name);
    if (it == arrays_.end()) {
      Array a{descr, shape, row_bytes, 0};
      const std::string header = npy_header(a.descr, a.shape);
      a.data_offset = int64_t(header.size());
      // Created whole (header, then the full size as a sparse file) under a temporary name.
      const std::string tmp = path + ".tmp";
      const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) fail("cannot create ", tmp, ": ", std::strerror(errno));
      pwrite_all(fd, header.data(), header.size(), 0, tmp);
      const int rc = ::ftruncate(fd, off_t(a.data_offset + a.row_bytes * total_));
      const int err = errno;
      ::close(fd);
      if (rc != 0) fail("cannot size ", tmp, " to ", a.data_offset + a.row_bytes * total_, " bytes: ", std::strerror(err));
      fs::rename(tmp, path);
      it = arrays_.emplace(name, a).first;
    } else if (it->second.descr != descr || it->second.shape != shape) {
      fail("npy output: ", name, " changed shape or dtype between pieces");
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot open ", path, ": ", std::strerror(errno));
    pwrite_all(fd, static_cast<const char*>(t.raw()), size_t(row_bytes * n),
               it->second.data_offset + first * row_bytes, path);
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) fail("cannot flush ", path, ": ", std::strerror(err));
  }
  done_.push_back(first);
  save_progress();
}

void NpyOutput::save_progress() const {
  nlohmann::json arrays = nlohmann::json::object();
  for (const auto& [name, a] : arrays_)
    arrays[name] = {{"descr", a.descr}, {"shape", a.shape}, {"row_bytes", a.row_bytes}, {"data_offset", a.data_offset}};
  const nlohmann::json p = {{"run", run_key_.str()}, {"piece_records", chunk_}, {"arrays", arrays}, {"done", done_}};
  write_file_atomic((fs::path(dir_) / "progress.json").string(),
                    p.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

NamesTsv::NamesTsv(const std::string& dir)
    : file_(std::make_unique<AtomicFileWriter>((fs::path(dir) / "names.tsv").string())), buf_("row\tname\n") {}

NamesTsv::~NamesTsv() = default;

void NamesTsv::add(std::string_view name) {
  const size_t at = buf_.size();
  buf_ += std::to_string(row_++);
  buf_ += '\t';
  buf_.append(name);
  std::replace_if(buf_.begin() + ptrdiff_t(at), buf_.end(), [](char c) { return c == '\n' || c == '\r'; }, ' ');
  const size_t tab = buf_.find('\t', at);
  std::replace(buf_.begin() + ptrdiff_t(tab) + 1, buf_.end(), '\t', ' ');
  buf_ += '\n';
  if (buf_.size() >= (size_t(1) << 20)) {
    file_->write(buf_.data(), buf_.size());
    buf_.clear();
  }
}

void NamesTsv::commit() {
  file_->write(buf_.data(), buf_.size());
  buf_.clear();
  file_->commit();
}

void NpyOutput::finish(const std::vector<std::string>& names, const std::string& summary_json) const {
  NamesTsv tsv(dir_);
  for (const std::string& nm : names) tsv.add(nm);
  tsv.commit();
  finish(summary_json);
}

void NpyOutput::finish(const std::string& summary_json) const {
  nlohmann::json arrays = nlohmann::json::object();
  for (const auto& [name, a] : arrays_) arrays[name] = {{"file", name + ".npy"}, {"dtype", a.descr}, {"shape", a.shape}};
  nlohmann::json index = {{"num_records", total_}, {"format", "npy"}, {"run", run_key_.str()}, {"arrays", arrays},
                          {"names", "names.tsv"}};
  index["summary"] = nlohmann::json::parse(summary_json);
  write_file_atomic((fs::path(dir_) / "index.json").string(),
                    index.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace biofm::infer
