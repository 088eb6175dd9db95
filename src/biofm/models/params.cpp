#include "biofm/models/params.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <utility>

#include "biofm/core/hash.h"
#include "biofm/core/rng.h"
#include "biofm/ops/elementwise/op.h"

namespace biofm {

ParamStore::ParamStore(std::vector<ParamSpec> specs, Device device, DType dtype, ParamShard shard)
    : specs_(std::move(specs)), device_(device) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    fail("parameter store dtype must be F32 or BF16, got ", dtype_name(dtype));
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (by_name_.count(specs_[i].name)) fail("duplicate parameter name ", specs_[i].name);
    by_name_[specs_[i].name] = i;
    offsets_.push_back(total_);
    // Keep every parameter 16-element aligned (64 bytes in fp32) for vector loads, except
    // inside a fused group, whose members must stay back to back (weight_concat).
    const int64_t n = shape_numel(specs_[i].shape);
    total_ += specs_[i].fuse_with_next ? n : (n + 15) / 16 * 16;
  }
  grad_held_ = shard_range(total_, shard.rank, shard.world);
  grads_sharded_ = shard.active();
  sharded_ = shard.active() && !shard.gradients_only;
  held_ = sharded_ ? grad_held_ : std::pair<int64_t, int64_t>{0, total_};
  flat_ = Tensor::zeros({held_.second - held_.first}, dtype, device);
  grad_flat_ = Tensor::zeros({grad_held_.second - grad_held_.first}, DType::F32, device);
}

std::pair<int64_t, int64_t> shard_range(int64_t numel, int rank, int world) {
  const int64_t per = (numel + world - 1) / world;
  return {std::min(numel, per * rank), std::min(numel, per * (rank + 1))};
}

Tensor ParamStore::param(size_t i) const {
  if (!sharded_) return flat_.flat_slice(offsets_[i], specs_[i].shape);
  if (!full_copy_.defined())
    fail("parameter '", specs_[i].name, "' is sharded over the ranks (fsdp) and no full copy is gathered");
  return full_copy_.flat_slice(offsets_[i], specs_[i].shape);
}

Tensor ParamStore::locate(bool grad, int64_t offset, const Shape& shape) const {
  const bool whole = grad ? !gradients_sharded() : !sharded_;
  if (whole) return (grad ? grad_flat_ : compute_.defined() ? compute_ : flat_).flat_slice(offset, shape);
  const int64_t n = shape_numel(shape);
  for (const Resident& r : residents_) {
    const Tensor& t = grad ? r.grad : r.weight;
    if (t.defined() && offset >= r.begin && offset + n <= r.begin + t.numel()) return t.flat_slice(offset - r.begin, shape);
  }
  fail(grad ? "gradients" : "parameters", " at [", offset, ", ", offset + n, ") of the layout are sharded (",
       sharded_ ? "fsdp" : "zero2", ") and not resident");
}

void ParamStore::keep_only(int64_t begin, int64_t end) {
  if (sharded_ || gradients_sharded()) fail("ParamStore::keep_only: already sharded");
  if (begin < 0 || end > total_ || begin > end) fail("ParamStore::keep_only: bad range [", begin, ", ", end, ")");
  auto part = [&](const Tensor& t) { return t.defined() ? t.flat_slice(begin, {end - begin}).clone() : Tensor(); };
  flat_ = part(flat_);
  compute_ = part(compute_);
  grad_flat_ = Tensor::zeros({end - begin}, DType::F32, grad_flat_.device());
  held_ = grad_held_ = {begin, end};
  sharded_ = grads_sharded_ = true;
  ++version_;
}

void ParamStore::shard_gradients(int64_t begin, int64_t end) {
  if (sharded_ || gradients_sharded()) fail("ParamStore::shard_gradients: already sharded");
  if (begin < 0 || end > total_ || begin > end) fail("ParamStore::shard_gradients: bad range [", begin, ", ", end, ")");
  if (!grad_flat_.defined()) fail("ParamStore::shard_gradients: this store holds no gradients");
  const Device d = grad_flat_.device();
  grad_flat_ = Tensor();  // (freed before the shard is allocated: no moment holds both)
  grad_flat_ = Tensor::zeros({end - begin}, DType::F32, d);
  grad_held_ = {begin, end};
  grads_sharded_ = true;
}

void ParamStore::set_resident(size_t slot, Resident r) {
  if (!sharded_ && !gradients_sharded()) fail("ParamStore::set_resident: the store is not sharded");
  const bool bad_weight = r.weight.defined() && (!sharded_ || r.weight.dtype() != compute_dtype());
  const bool bad_grad = r.grad.defined() && (r.grad.dtype() != DType::F32 ||
                                             (r.weight.defined() && r.grad.numel() != r.weight.numel()));
  if (bad_weight || bad_grad || (!r.weight.defined() && !r.grad.defined()))
    fail("ParamStore::set_resident: ", r.weight.describe(), " / ", r.grad.describe());
  if (residents_.size() <= slot) residents_.resize(slot + 1);
  residents_[slot] = std::move(r);
}

void ParamStore::clear_resident(size_t slot) {
  if (slot < residents_.size()) residents_[slot] = Resident{};
}

void ParamStore::set_full_copy(Tensor full) {
  if (full.numel() != total_ || full.dtype() != flat_.dtype())
    fail("ParamStore::set_full_copy: ", full.describe(), " for ", total_, " ", dtype_name(flat_.dtype()), " elements");
  full_copy_ = std::move(full);
}

size_t ParamStore::index(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) fail("model has no parameter named '", name, "'");
  return it->second;
}

namespace {

// Elements [j0, j1) of parameter i's initial values (spec s) into w[0, j1 - j0): each element
// depends on (seed, i, j) only, so threads, shards and a partial re-initialisation agree with a
// whole one.
void fill_init(const ParamSpec& s, size_t i, uint64_t seed, float* w, int64_t j0, int64_t j1) {
  switch (s.init) {
    case Init::Zeros:
      std::fill(w, w + (j1 - j0), 0.0f);
      break;
    case Init::Ones:
      std::fill(w, w + (j1 - j0), 1.0f);
      break;
    case Init::Normal:
#pragma omp parallel for schedule(static)
      for (int64_t j = j0; j < j1; ++j)
        w[j - j0] = s.std * rng_normal(seed, RngStream::Init, (uint64_t(i) << 40) | uint64_t(j), 0);
      break;
  }
  if (s.zero_row >= 0) {
    const int64_t row = shape_numel(s.shape) / s.shape[0];
    const int64_t a = std::max(j0, s.zero_row * row), b = std::min(j1, (s.zero_row + 1) * row);
    if (a < b) std::fill(w + (a - j0), w + (b - j0), 0.0f);
  }
}

}  // namespace

std::pair<int64_t, Tensor> ParamStore::held_part(size_t i) const {
  const int64_t b = std::max(offsets_[i], held_.first);
  const int64_t e = std::min(offsets_[i] + shape_numel(specs_[i].shape), held_.second);
  if (b >= e) return {0, Tensor()};
  return {b - offsets_[i], flat_.flat_slice(b - held_.first, {e - b})};
}

void ParamStore::init(uint64_t seed) {
  if (!sharded_) {
    Tensor host = Tensor::zeros({total_}, DType::F32);
    for (size_t i = 0; i < specs_.size(); ++i)
      fill_init(specs_[i], i, seed, host.f32() + offsets_[i], 0, shape_numel(specs_[i].shape));
    set_from_host_f32(host);
    return;
  }
  std::vector<size_t> all(specs_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  init_params(seed, all);
}

void ParamStore::init_params(uint64_t seed, const std::vector<size_t>& which) {
  for (size_t i : which) {
    auto [first, dst] = held_part(i);
    if (!dst.defined()) continue;
    Tensor host = Tensor::empty({dst.numel()}, DType::F32);
    fill_init(specs_.at(i), i, seed, host.f32(), first, first + dst.numel());
    dst.copy_from(host.to(dst.dtype()));
  }
  ++version_;
  refresh_compute_copy();
}

void ParamStore::set_from_host_f32(const Tensor& host) {
  ++version_;
  flat_.copy_from(host.to(flat_.dtype()));  // BF16 store: rounded to nearest even on the host
  refresh_compute_copy();
}

void ParamStore::enable_compute_copy() {
  if (flat_.dtype() != DType::F32)
    fail("a bf16 compute copy needs fp32 master parameters (this store is ", dtype_name(flat_.dtype()), ")");
  if (!compute_.defined()) compute_ = Tensor::empty({flat_.numel()}, DType::BF16, device_);
  refresh_compute_copy();
}

void ParamStore::refresh_compute_copy() {
  ++version_;
  if (!compute_.defined()) return;
  if (flat_.device() == compute_.device()) {
    ops::cast(compute_, flat_);
    return;
  }
  // Masters moved to the host (move_master): cast on the device, a bounded chunk at a time.
  const int64_t n = flat_.numel(), chunk = int64_t(1) << 24;
  Tensor staging = Tensor::empty({std::min(n, chunk)}, DType::F32, device_);
  for (int64_t c = 0; c < n; c += chunk) {
    const int64_t len = std::min(chunk, n - c);
    Tensor s = staging.flat_slice(0, {len}), dst = compute_.flat_slice(c, {len});
    s.copy_from(flat_.flat_slice(c, {len}));
    ops::cast(dst, s);
  }
}

void ParamStore::move_master(Tensor dst) {
  if (!compute_.defined()) fail("ParamStore::move_master: only with a compute copy (forward and backward read it)");
  if (dst.numel() != flat_.numel() || dst.dtype() != flat_.dtype())
    fail("ParamStore::move_master: ", dst.describe(), " for ", flat_.describe());
  dst.copy_from(flat_);
  flat_ = std::move(dst);
  ++version_;
}

Tensor ParamStore::decay_ranges() const {
  std::vector<int64_t> r;
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (!specs_[i].decay) continue;
    // Ranges extend over the alignment padding (always zero) so neighbours merge.
    int64_t start = offsets_[i], end = i + 1 < specs_.size() ? offsets_[i + 1] : total_;
    if (!r.empty() && r.back() == start)
      r.back() = end;
    else
      r.insert(r.end(), {start, end});
  }
  Tensor t = Tensor::empty({int64_t(r.size() / 2), 2}, DType::I64);
  for (size_t i = 0; i < r.size(); ++i) t.i64()[i] = r[i];
  return t.to(device_);
}

void ParamStore::load(const SafetensorsFile& f,
                      const std::function<bool(const std::string&)>& ignorable,
                      const std::function<std::string(const std::string&)>& rename) {
  if (sharded_) fail("ParamStore::load: not for a sharded store (load_mapped reads a rank's part)");
  std::vector<bool> seen(specs_.size(), false);
  Tensor host = Tensor::zeros({total_}, DType::F32);
  for (auto& [raw_name, t] : f.tensors) {
    std::string name = rename ? rename(raw_name) : raw_name;
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      if (ignorable && ignorable(name)) continue;
      fail(f.source, ": unexpected tensor '", raw_name, "' (not a parameter of this model)");
    }
    const ParamSpec& s = specs_[it->second];
    if (t.shape() != s.shape)
      fail(f.source, ": tensor '", raw_name, "' has shape ", shape_str(t.shape()), ", model expects ",
           shape_str(s.shape));
    if (t.dtype() != DType::F32 && t.dtype() != DType::BF16)
      fail(f.source, ": tensor '", raw_name, "' has unsupported dtype ", dtype_name(t.dtype()));
    host.flat_slice(offsets_[it->second], s.shape).copy_from(t.to(DType::F32));
    seen[it->second] = true;
  }
  for (size_t i = 0; i < specs_.size(); ++i)
    if (!seen[i]) fail(f.source, ": missing parameter '", specs_[i].name, "'");
  set_from_host_f32(host);
}

void ParamStore::load_mapped(const std::vector<Source>& sources) {
  if (sources.size() != specs_.size())
    fail("ParamStore::load_mapped: ", sources.size(), " sources for ", specs_.size(), " parameters");
  for (size_t i = 0; i < specs_.size(); ++i) {
    const Source& s = sources[i];
    if (!s.file) continue;
    if (s.entry->shape != specs_[i].shape)
      fail(s.file->path(), ": tensor '", s.entry->name, "' has shape ", shape_str(s.entry->shape), ", model expects ",
           shape_str(specs_[i].shape), " for '", specs_[i].name, "'");
    if (s.entry->dtype != "F32" && s.entry->dtype != "BF16" && s.entry->dtype != "F16")
      fail(s.file->path(), ": tensor '", s.entry->name, "' has unsupported dtype ", s.entry->dtype);
  }
  ++version_;
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (!sources[i].file) continue;
    if (!sharded_) {
      sources[i].file->copy_into(*sources[i].entry, param(i));
      continue;
    }
    auto [first, dst] = held_part(i);  // (a sharded store reads only its part)
    if (dst.defined()) sources[i].file->copy_range_into(*sources[i].entry, first, dst);
  }
  refresh_compute_copy();
}

std::string ParamStore::layout_digest() const {
  // FNV-1a over "name:shape;" of every parameter in order: cheap, and any renamed, reshaped,
  // added or reordered parameter changes it.
  uint64_t h = kFnv1aStart;
  for (const ParamSpec& sp : specs_) h = fnv1a(sp.name + ":" + shape_str(sp.shape) + ";", h);
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", (unsigned long long)h);
  return out;
}

std::vector<SafetensorsSource> ParamStore::flat_shard_for_writing(DType dtype) const {
  return {{"flat", flat_, dtype}};
}

std::map<std::string, std::string> ParamStore::flat_shard_metadata() const {
  return {{"flat_begin", std::to_string(held_.first)},
          {"flat_end", std::to_string(held_.second)},
          {"flat_numel", std::to_string(total_)},
          {"layout", layout_digest()}};
}

void ParamStore::load_flat_shards(const std::vector<const MappedSafetensors*>& files) {
  const auto [begin, end] = held_;
  const std::string digest = layout_digest();
  std::vector<std::pair<int64_t, int64_t>> covered;
  for (const MappedSafetensors* f : files) {
    int64_t fb = 0, fe = 0, fn = 0;
    std::string layout;
    try {
      fb = std::stoll(f->metadata().at("flat_begin"));
      fe = std::stoll(f->metadata().at("flat_end"));
      fn = std::stoll(f->metadata().at("flat_numel"));
      layout = f->metadata().at("layout");
    } catch (const std::exception&) {
      fail(f->path(), ": a flat model shard needs flat_begin, flat_end, flat_numel and layout metadata");
    }
    if (fn != total_ || layout != digest)
      fail(f->path(), ": a shard of another model (", fn, " parameters, layout ", layout, "; this one: ", total_,
           ", layout ", digest, ")");
    if (fb < 0 || fb > fe || fe > fn) fail(f->path(), ": flat range [", fb, ", ", fe, ") outside [0, ", fn, ")");
    const SafetensorsEntry* e = f->find("flat");
    if (!e || shape_numel(e->shape) != fe - fb) fail(f->path(), ": tensor 'flat' is missing or does not hold [", fb, ", ", fe, ")");
    const int64_t a = std::max(begin, fb), b = std::min(end, fe);
    if (a >= b) continue;
    f->copy_range_into(*e, a - fb, flat_.flat_slice(a - begin, {b - a}));
    covered.push_back({a, b});
  }
  std::sort(covered.begin(), covered.end());
  int64_t at = begin;
  for (const auto& [a, b] : covered) {
    if (a > at) break;
    at = std::max(at, b);
  }
  if (at < end)
    fail("flat model shards: elements [", at, ", ", end, ") of the parameters are in none of the ", files.size(),
         " shard files");
  ++version_;
  refresh_compute_copy();
}

void ParamStore::load_flat_shard_files(const std::vector<std::string>& paths) {
  int world = -1;
  std::vector<bool> seen;
  for (const std::string& path : paths) {
    const std::string name = path.substr(path.find_last_of('/') + 1);
    int r = -1, w = -1;
    char tail[16] = {};
    if (std::sscanf(name.c_str(), "model-rank%d-of-%d%15s", &r, &w, tail) != 3 || std::string(tail) != ".safetensors" ||
        w < 1 || r < 0 || r >= w)
      fail(path, ": not a model shard name (model-rankR-of-W.safetensors)");
    if (world < 0) world = w, seen.assign(size_t(w), false);
    if (w != world) fail(path, ": a shard of a ", w, "-rank run beside shards of a ", world, "-rank run");
    seen[size_t(r)] = true;
  }
  for (int r = 0; r < world; ++r)
    if (!seen[size_t(r)]) fail("model shards of a ", world, "-rank run: rank ", r, "'s file is missing");
  std::vector<std::unique_ptr<MappedSafetensors>> files;
  std::vector<const MappedSafetensors*> views;
  for (const std::string& path : paths) {
    files.push_back(std::make_unique<MappedSafetensors>(path));
    views.push_back(files.back().get());
  }
  load_flat_shards(views);
}

std::vector<SafetensorsSource> ParamStore::tensors_for_writing(DType dtype) const {
  std::vector<SafetensorsSource> out;
  for (size_t i = 0; i < specs_.size(); ++i) out.push_back({specs_[i].name, param(i), dtype});
  return out;
}

std::map<std::string, Tensor> ParamStore::export_tensors(DType dtype) const {
  if (sharded_ && !full_copy_.defined()) fail("ParamStore::export_tensors: sharded (fsdp) without a full copy");
  Tensor host = (sharded_ ? full_copy_ : flat_).to(Device::CPU);
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < specs_.size(); ++i)
    out[specs_[i].name] = host.flat_slice(offsets_[i], specs_[i].shape).clone().to(dtype);
  return out;
}

Tensor ParamStore::span(bool grad, size_t first, size_t count) const {
  Shape shape = specs_[first].shape;
  for (size_t j = 1; j < count; ++j) shape[0] += specs_[first + j].shape[0];
  return locate(grad, offsets_[first], shape);
}

Tensor ParamStore::concat(bool grad, const std::vector<std::string>& names) const {
  const Shape shape = concat_shape(names);
  return locate(grad, offsets_[index(names[0])], shape);
}

Shape ParamStore::concat_shape(const std::vector<std::string>& names) const {
  if (names.empty()) fail("ParamStore::concat: no parameters named");
  const size_t first = index(names[0]);
  Shape shape = specs_[first].shape;
  if (shape.empty()) fail("ParamStore::concat: '", names[0], "' is a scalar");
  for (size_t j = 1; j < names.size(); ++j) {
    const size_t i = index(names[j]);
    const Shape& s = specs_[i].shape;
    if (i != first + j || !specs_[i - 1].fuse_with_next || s.size() != shape.size() ||
        !std::equal(s.begin() + 1, s.end(), shape.begin() + 1))
      fail("ParamStore::concat: '", names[j], "' ", shape_str(s), " does not directly follow '", names[j - 1],
           "' (marked fuse_with_next) with the same trailing shape");
    shape[0] += s[0];
  }
  return shape;
}

Tensor ParamStore::swap_grad_buffer(Tensor buffer) {
  if (!grad_flat_.defined()) fail("swap_grad_buffer: this store holds no gradients");
  if (!buffer.defined() || buffer.dtype() != DType::F32 || buffer.numel() != grad_flat_.numel() ||
      buffer.device() != grad_flat_.device())
    fail("swap_grad_buffer: need F32[", grad_flat_.numel(), "] on the gradients' device, got ",
         buffer.defined() ? buffer.describe() : std::string("none"));
  buffer.copy_from(grad_flat_);
  std::swap(buffer, grad_flat_);
  return buffer;
}

}  // namespace biofm
