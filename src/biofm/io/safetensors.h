// Reading and writing the safetensors format (Hugging Face): an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the
// raw little-endian tensor bytes.
//
// Large files go through MappedSafetensors (read: a memory mapping, tensors converted straight
// into their destination in bounded chunks) and write_safetensors_stream (write: header first,
// then each tensor copied to the host and converted in bounded chunks, CRC32 computed while
// writing). SafetensorsFile / read_safetensors / write_safetensors hold whole tensors in host
// memory: for small files (fixtures, embeddings, tests).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "biofm/core/tensor.h"
#include "biofm/io/stream_file.h"

namespace biofm {

// One tensor of a mapped file. dtype as the file spells it ("F32", "BF16", "F16", "I32", ...).
struct SafetensorsEntry {
  std::string name, dtype;
  Shape shape;
  size_t begin = 0, nbytes = 0;  // byte range within the file
};

class MappedSafetensors {
 public:
  // Maps the file and validates the header (offsets inside the file, sizes matching shapes).
  explicit MappedSafetensors(const std::string& path);
  const std::string& path() const { return file_->path(); }
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // sorted by name
  const SafetensorsEntry* find(const std::string& name) const;                // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const MappedFile& file() const { return *file_; }
  // Copies entry `e` into dst (F32 or BF16, on any device, same element count), converting
  // from F32, BF16 or F16 on the host in chunks of at most kStreamChunkBytes; the mapped pages
  // are released as they are consumed. Errors name the file and the tensor.
  void copy_into(const SafetensorsEntry& e, const Tensor& dst) const;
  // The same for elements [first, first + dst.numel()) of the flattened entry (one rank's
  // shard of a flat buffer).
  void copy_range_into(const SafetensorsEntry& e, int64_t first, const Tensor& dst) const;

 private:
  std::unique_ptr<MappedFile> file_;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// A tensor to write: any device, F32 or BF16 (or any dtype when written as itself), stored as
// `dtype` (F32 ↔ BF16 conversion happens on the host, chunk by chunk).
struct SafetensorsSource {
  std::string name;
  Tensor tensor;
  DType dtype;
};
// Writes atomically (temporary file, fsync, rename) with bounded host memory; returns the
// size and CRC32 of the file written.
FileDigest write_safetensors_stream(const std::string& path, const std::vector<SafetensorsSource>& tensors,
                                    const std::map<std::string, std::string>& metadata = {});

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;  // CPU tensors (F16 widened to F32)
  std::map<std::string, std::string> metadata;

  bool has(const std::string& name) const { return tensors.count(name) != 0; }
  // The named tensor; a missing name throws, naming the file it was read from.
  const Tensor& get(const std::string& name) const;
  std::string source;  // path read from, for messages
};

// Reads and validates the whole file (sizes, offsets, dtypes); corrupt files throw with the path.
SafetensorsFile read_safetensors(const std::string& path);

// Writes atomically (temporary file, fsync, rename). Tensors may live on any device.
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace biofm
