// Reading and writing the safetensors format (Hugging Face): an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}}, then the
// raw little-endian tensor bytes.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "biofm/core/tensor.h"

namespace biofm {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;  // CPU tensors
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
