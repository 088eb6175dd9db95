#include "biofm/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

namespace biofm {

using json = nlohmann::json;

namespace {

size_t file_dtype_size(const std::string& dt) {
  if (dt == "F64" || dt == "I64" || dt == "U64") return 8;
  if (dt == "F32" || dt == "I32" || dt == "U32") return 4;
  if (dt == "F16" || dt == "BF16" || dt == "I16" || dt == "U16") return 2;
  if (dt == "I8" || dt == "U8" || dt == "BOOL" || dt == "F8_E4M3" || dt == "F8_E5M2") return 1;
  fail("unknown safetensors dtype '", dt, "'");
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while (!(mant & 0x400u));
    bits = sign | (uint32_t(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// n elements of file dtype `src_dt` at (possibly unaligned) `src` → dst of `dst_dt` on the host.
void convert(const char* src, const std::string& src_dt, void* dst, DType dst_dt, size_t n) {
  const bool same = (src_dt == "F32" && dst_dt == DType::F32) || (src_dt == "BF16" && dst_dt == DType::BF16);
  if (same) {
    std::memcpy(dst, src, n * dtype_size(dst_dt));
    return;
  }
  auto read = [&](size_t i) -> float {
    if (src_dt == "F32") {
      float f;
      std::memcpy(&f, src + 4 * i, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    return src_dt == "BF16" ? bf16_to_f32(h) : f16_to_f32(h);
  };
  if (dst_dt == DType::F32) {
    float* d = static_cast<float*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = read(i);
  } else {
    bf16* d = static_cast<bf16*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(read(i));
  }
}

}  // namespace

MappedSafetensors::MappedSafetensors(const std::string& path) : file_(std::make_unique<MappedFile>(path)) {
  const char* bytes = file_->data();
  const size_t size = file_->size();
  if (size < 8) fail(path, ": not a safetensors file (", size, " bytes)");
  uint64_t hlen = 0;
  std::memcpy(&hlen, bytes, 8);
  if (hlen > size - 8) fail(path, ": corrupt safetensors header length ", hlen);
  json header;
  try {
    header = json::parse(bytes + 8, bytes + 8 + hlen);
  } catch (const std::exception& e) {
    fail(path, ": corrupt safetensors header: ", e.what());
  }
  if (!header.is_object()) fail(path, ": safetensors header is not a JSON object");
  const size_t data_start = 8 + hlen, data_size = size - data_start;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) fail(path, ": safetensors __metadata__ is not a JSON object");
      for (auto& [k, v] : info.items()) metadata_[k] = v.is_string() ? v.get<std::string>() : v.dump();
      continue;
    }
    try {
      SafetensorsEntry e;
      e.name = name;
      if (!info.is_object()) fail("entry is not a JSON object");
      e.dtype = info.at("dtype").get<std::string>();
      e.shape = info.at("shape").get<Shape>();
      auto offs = info.at("data_offsets").get<std::vector<uint64_t>>();
      if (offs.size() != 2 || offs[0] > offs[1] || offs[1] > data_size) fail("data offsets out of range");
      if (e.shape.size() > 8) fail("more than 8 dimensions (", e.shape.size(), ")");
      // The byte count is checked against the file before anything is sized from the shape;
      // the product is built so that it cannot overflow (each factor is bounded by the file).
      const uint64_t elem = file_dtype_size(e.dtype);
      uint64_t want = elem;
      bool empty = false;
      for (int64_t d : e.shape) {
        if (d < 0) fail("negative dimension in shape ", shape_str(e.shape));
        if (d == 0) empty = true;
      }
      if (empty) want = 0;
      for (int64_t d : e.shape) {
        if (empty) break;
        if (uint64_t(d) > data_size || want > data_size / uint64_t(d))
          fail("shape ", shape_str(e.shape), " is larger than the file's data (", data_size, " bytes)");
        want *= uint64_t(d);
      }
      if (want != offs[1] - offs[0]) fail("size ", offs[1] - offs[0], " does not match shape ", shape_str(e.shape));
      e.begin = data_start + offs[0];
      e.nbytes = want;
      index_[name] = entries_.size();
      entries_.push_back(std::move(e));
    } catch (const Error& e) {
      fail(path, ": tensor '", name, "': ", e.what());
    } catch (const std::exception& e) {
      fail(path, ": tensor '", name, "': malformed entry (", e.what(), ")");
    }
  }
  file_->release(0, data_start);
}

const SafetensorsEntry* MappedSafetensors::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void MappedSafetensors::copy_into(const SafetensorsEntry& e, const Tensor& dst) const {
  const int64_t n = shape_numel(e.shape);
  if (n != dst.numel())
    fail(path(), ": tensor '", e.name, "' has ", n, " elements, destination ", dst.describe(), " has ", dst.numel());
  copy_range_into(e, 0, dst);
}

void MappedSafetensors::copy_range_into(const SafetensorsEntry& e, int64_t first, const Tensor& dst) const {
  if (e.dtype != "F32" && e.dtype != "BF16" && e.dtype != "F16")
    fail(path(), ": tensor '", e.name, "' has dtype ", e.dtype, " (weights must be F32, BF16 or F16)");
  if (dst.dtype() != DType::F32 && dst.dtype() != DType::BF16)
    fail(path(), ": tensor '", e.name, "': cannot load into ", dst.describe());
  const int64_t total = shape_numel(e.shape), n = dst.numel();
  if (first < 0 || first + n > total)
    fail(path(), ": tensor '", e.name, "' has ", total, " elements; elements [", first, ", ", first + n, ") were asked for");
  const size_t src_elem = e.nbytes / size_t(std::max<int64_t>(total, 1));
  const int64_t chunk = int64_t(kStreamChunkBytes / 4);
  Tensor flat = dst.view({-1}), staging;
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t k = std::min(chunk, n - off);
    const size_t src_begin = e.begin + size_t(first + off) * src_elem;
    const char* src = file_->data() + src_begin;
    Tensor part = flat.flat_slice(off, {k});
    if (dst.device() == Device::CPU) {
      convert(src, e.dtype, part.raw(), dst.dtype(), size_t(k));
    } else {
      if (!staging.defined()) staging = Tensor::empty({std::min(chunk, n)}, dst.dtype());
      Tensor host = staging.flat_slice(0, {k});
      convert(src, e.dtype, host.raw(), dst.dtype(), size_t(k));
      part.copy_from(host);
    }
    file_->release(src_begin, size_t(k) * src_elem);
  }
}

FileDigest write_safetensors_stream(const std::string& path, const std::vector<SafetensorsSource>& tensors,
                                    const std::map<std::string, std::string>& metadata) {
  // Data in name order, as the header (a sorted JSON object) lists them.
  std::vector<const SafetensorsSource*> order;
  for (auto& s : tensors) order.push_back(&s);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->name < b->name; });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const SafetensorsSource& s = *order[i];
    if (s.name == "__metadata__" || (i > 0 && order[i - 1]->name == s.name))
      fail(path, ": tensor name '", s.name, "' is reserved or repeated");
    if (s.dtype != s.tensor.dtype() &&
        !((s.dtype == DType::F32 || s.dtype == DType::BF16) &&
          (s.tensor.dtype() == DType::F32 || s.tensor.dtype() == DType::BF16)))
      fail(path, ": tensor '", s.name, "' ", s.tensor.describe(), " cannot be written as ", dtype_name(s.dtype));
    const uint64_t nbytes = uint64_t(s.tensor.numel()) * dtype_size(s.dtype);
    header[s.name] = {{"dtype", dtype_name(s.dtype)}, {"shape", s.tensor.shape()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8) h.push_back(' ');
  AtomicFileWriter out(path);
  const uint64_t hlen = h.size();
  out.write(&hlen, 8);
  out.write(h.data(), h.size());
  const int64_t chunk = int64_t(kStreamChunkBytes / 4);
  for (const SafetensorsSource* s : order) {
    const int64_t n = s->tensor.numel();
    if (n == 0) continue;
    Tensor flat = s->tensor.view({-1});
    for (int64_t off = 0; off < n; off += chunk) {
      Tensor host = flat.flat_slice(off, {std::min(chunk, n - off)}).to(Device::CPU).to(s->dtype);
      out.write(host.raw(), host.nbytes());
    }
  }
  out.commit();
  return {out.bytes(), out.crc32()};
}

const Tensor& SafetensorsFile::get(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) fail("tensor '", name, "' not found in ", source);
  return it->second;
}

SafetensorsFile read_safetensors(const std::string& path) {
  MappedSafetensors m(path);
  SafetensorsFile out;
  out.source = path;
  out.metadata = m.metadata();
  for (const SafetensorsEntry& e : m.entries()) {
    try {
      if (e.dtype == "F16") {
        Tensor t = Tensor::empty(e.shape, DType::F32);
        m.copy_into(e, t);
        out.tensors[e.name] = t;
        continue;
      }
      Tensor t = Tensor::empty(e.shape, dtype_from_name(e.dtype));
      if (e.nbytes) std::memcpy(t.raw(), m.file().data() + e.begin, e.nbytes);
      out.tensors[e.name] = t;
    } catch (const Error& err) {
      if (std::string(err.what()).find(path) != std::string::npos) throw;
      fail(path, ": tensor '", e.name, "': ", err.what());
    }
  }
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsSource> src;
  for (auto& [name, t] : tensors) src.push_back({name, t, t.dtype()});
  write_safetensors_stream(path, src, metadata);
}

}  // namespace biofm
