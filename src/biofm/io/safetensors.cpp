#include "biofm/io/safetensors.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "biofm/io/atomic_file.h"

namespace biofm {

using json = nlohmann::json;

const Tensor& SafetensorsFile::get(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) fail("tensor '", name, "' not found in ", source);
  return it->second;
}

SafetensorsFile read_safetensors(const std::string& path) {
  std::string bytes = read_file(path);
  SafetensorsFile out;
  out.source = path;
  if (bytes.size() < 8) fail(path, ": not a safetensors file (", bytes.size(), " bytes)");
  uint64_t hlen = 0;
  std::memcpy(&hlen, bytes.data(), 8);
  if (hlen > bytes.size() - 8) fail(path, ": corrupt safetensors header length ", hlen);
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + int64_t(hlen));
  } catch (const std::exception& e) {
    fail(path, ": corrupt safetensors header: ", e.what());
  }
  if (!header.is_object()) fail(path, ": safetensors header is not a JSON object");
  const size_t data_start = 8 + hlen;
  const size_t data_size = bytes.size() - data_start;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      for (auto& [k, v] : info.items())
        out.metadata[k] = v.is_string() ? v.get<std::string>() : v.dump();
      continue;
    }
    try {
      DType dt = dtype_from_name(info.at("dtype").get<std::string>());
      Shape shape = info.at("shape").get<Shape>();
      auto offs = info.at("data_offsets").get<std::vector<uint64_t>>();
      if (offs.size() != 2 || offs[0] > offs[1] || offs[1] > data_size)
        fail("data offsets out of range");
      Tensor t = Tensor::empty(shape, dt);
      if (t.nbytes() != offs[1] - offs[0])
        fail("size ", offs[1] - offs[0], " does not match shape ", shape_str(shape));
      std::memcpy(t.raw(), bytes.data() + data_start + offs[0], t.nbytes());
      out.tensors[name] = t;
    } catch (const Error& e) {
      fail(path, ": tensor '", name, "': ", e.what());
    } catch (const std::exception& e) {
      fail(path, ": tensor '", name, "': malformed entry (", e.what(), ")");
    }
  }
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (auto& [name, t] : tensors) {
    header[name] = {{"dtype", dtype_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8) h.push_back(' ');
  std::string out;
  out.reserve(8 + h.size() + offset);
  uint64_t hlen = h.size();
  out.append(reinterpret_cast<const char*>(&hlen), 8);
  out += h;
  for (auto& [name, t] : tensors) {
    Tensor host = t.to(Device::CPU);
    out.append(static_cast<const char*>(host.raw()), host.nbytes());
  }
  write_file_atomic(path, out);
}

}  // namespace biofm
