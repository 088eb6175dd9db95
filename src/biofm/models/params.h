// Parameter tables and the flat parameter store.
//
// A model describes its parameters as a table (Hugging Face name, shape, init rule,
// weight-decay flag). The store lays them out back to back in one flat buffer, with the
// gradients in a second buffer of the same layout, so that init, import/export, the
// optimizer, gradient norms and (later) sharding are generic over the table.
//
// The master buffer is F32 (fp32 and bf16-mixed precision, the latter adding a BF16 compute
// copy) or BF16 (pure bf16 precision: no fp32 copy exists; param(), weight() and flat() are
// all BF16). Gradients are F32 in every case.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "biofm/core/tensor.h"
#include "biofm/io/safetensors.h"

namespace biofm {

enum class Init { Normal, Zeros, Ones };

struct ParamSpec {
  std::string name;  // Hugging Face state-dict name
  Shape shape;
  Init init = Init::Normal;
  float std = 0.02f;     // for Init::Normal
  bool decay = true;     // weight decay applies
  int64_t zero_row = -1; // row left at zero after init (embedding padding_idx)
  bool fuse_with_next = false;  // the next parameter follows without padding (weight_concat)
};

// One rank's part of the flat layout under fully sharded training: rank r of `world` holds the
// contiguous range shard_range(numel, r, world) of every flat buffer (world 1: all of it) — or,
// gradients_only (zero2), of the gradient buffer alone (the weights whole).
struct ParamShard {
  int rank = 0, world = 1;
  bool gradients_only = false;
  bool active() const { return world > 1; }
};
std::pair<int64_t, int64_t> shard_range(int64_t numel, int rank, int world);

class ParamStore {
 public:
  ParamStore() = default;
  // dtype: the master buffer's dtype, F32 or BF16 (see above). An active shard allocates only
  // that rank's range of each buffer from the start (keep_only, below, without the whole first):
  // init and load_mapped then fill just that range. gradients_only: of the gradients only
  // (shard_gradients, below, without the whole first).
  ParamStore(std::vector<ParamSpec> specs, Device device, DType dtype = DType::F32, ParamShard shard = {});

  size_t size() const { return specs_.size(); }
  const ParamSpec& spec(size_t i) const { return specs_[i]; }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  int64_t numel() const { return total_; }
  int64_t offset(size_t i) const { return offsets_[i]; }
  size_t index(const std::string& name) const;  // throws naming the parameter if absent

  // Master parameter i (the store's dtype: F32, or BF16 for pure bf16 parameters). A sharded
  // store has it only while a full copy is set (below).
  Tensor param(size_t i) const;
  // The parameter as forward/backward read it: the BF16 compute copy when one is enabled,
  // else the master parameter (itself BF16 in a BF16 store); sharded: its resident copy.
  Tensor weight(size_t i) const { return locate(false, offsets_[i], specs_[i].shape); }
  Tensor weight(const std::string& name) const { return weight(index(name)); }
  Tensor grad(size_t i) const { return locate(true, offsets_[i], specs_[i].shape); }
  Tensor param(const std::string& name) const { return param(index(name)); }
  Tensor grad(const std::string& name) const { return grad(index(name)); }
  // Parameters that are consecutive in the table, each but the last marked fuse_with_next,
  // and agree in all but the first dimension,
  // as one tensor stacked along it (a view, no copy): e.g. q/k/v weights as one [Q+K+V, H]
  // matrix for a fused projection. Throws if they are not adjacent.
  Tensor weight_concat(const std::vector<std::string>& names) const { return concat(false, names); }
  Tensor grad_concat(const std::vector<std::string>& names) const { return concat(true, names); }
  // The stacked shape of weight_concat(names), with the same checks (no tensor needed).
  Shape concat_shape(const std::vector<std::string>& names) const;
  // The same by position: parameters [first, first + count) of the table (checked once by
  // weight_concat; these only slice).
  Tensor weight_span(size_t first, size_t count) const { return span(false, first, count); }
  Tensor grad_span(size_t first, size_t count) const { return span(true, first, count); }
  // Keeps a BF16 copy of all parameters for compute (mixed precision; F32 store only).
  void enable_compute_copy();
  // Re-derives the compute copy from the masters (after init, load or resume).
  void refresh_compute_copy();
  // Moves the master buffer into `dst` (same numel and dtype; pinned host memory for optimizer
  // offload): flat(), param() and every reader of the masters see it there, while forward and
  // backward keep reading the compute copy on the store's device. Needs a compute copy.
  void move_master(Tensor dst);
  // Mutable access counts as a change of the parameters (see version()).
  Tensor& compute_flat() { ++version_; return compute_; }  // undefined without a compute copy
  // A writer that updates the parameters part by part over a while (AdamW applied one layer
  // ahead of the next step's forward, train/optimizer.h) announces the change once, before it
  // writes any part, and then writes through the *_in_parts accessors, which leave version() as
  // it is: what is derived from a part after that part was written (its FP8 codes) stays current.
  void announce_change() { ++version_; }
  Tensor& flat_in_parts() { return flat_; }
  Tensor& compute_flat_in_parts() { return compute_; }
  // [start, end) element ranges of the parameters that take weight decay, as I64 [R,2]
  // on the store's device (adjacent ranges merged).
  Tensor decay_ranges() const;

  Tensor& flat() { ++version_; return flat_; }
  Tensor& grad_flat() { return grad_flat_; }
  // Changes with every way the parameters can be written through this store (mutable flat()
  // or compute_flat(), init, load, refresh_compute_copy): what caches derived from the
  // weights (FP8 codes) compare against.
  uint64_t version() const { return version_; }
  // Whether p points into the parameter buffers (master or compute copy).
  bool owns(const void* p) const {
    auto in = [p](const Tensor& t) {
      return t.defined() && p >= t.raw() && p < static_cast<const char*>(t.raw()) + t.nbytes();
    };
    return in(flat_) || in(compute_);
  }
  const Tensor& flat() const { return flat_; }
  const Tensor& grad_flat() const { return grad_flat_; }
  Device device() const { return device_; }  // of the compute copy and gradients (the masters too unless moved)
  DType dtype() const { return flat_.dtype(); }  // of the master buffer

  void zero_grad() { grad_flat_.zero_(); }
  // Forward-only use (embed, eval, score, generate): frees the gradient buffer (4 bytes per
  // parameter); nothing may run backward or touch gradients afterwards.
  void release_gradients() { grad_flat_ = Tensor(); }
  bool has_gradients() const { return grad_flat_.defined(); }
  // Moves the gradients into `buffer` (F32, the same size and device; their values copied) and
  // returns the buffer they were in: data-parallel runs reduce them in place in memory their
  // communicator registered (train/data_parallel.cpp).
  Tensor swap_grad_buffer(Tensor buffer);

  // ---- Sharded parameters (distributed.strategy=fsdp, train/fsdp.h) ----
  // Keeps only [begin, end) of the master, compute-copy and gradient buffers: flat(),
  // compute_flat() and grad_flat() are then that range (element e of the layout at e - begin).
  // Forward and backward then read weights and add gradients in resident copies of parts of
  // the layout (a gathered layer) that the fsdp schedule installs and removes.
  void keep_only(int64_t begin, int64_t end);
  bool sharded() const { return sharded_; }
  // [begin, end) of the layout that flat(), compute_flat() and grad_flat() hold.
  std::pair<int64_t, int64_t> held() const { return held_; }
  // ---- Sharded gradients only (distributed.strategy=zero2) ----
  // Keeps only [begin, end) of the gradient buffer: grad_flat() is that range, while every
  // weight stays whole. Backward then adds gradients in resident gradient copies (Resident
  // with an undefined weight) that the zero2 schedule installs.
  void shard_gradients(int64_t begin, int64_t end);
  bool gradients_sharded() const { return grads_sharded_; }
  // [begin, end) of the layout that grad_flat() holds (held() under fsdp; all of it unsharded).
  std::pair<int64_t, int64_t> grad_held() const { return grad_held_; }
  // A copy of [begin, begin + n) of the layout: weight in compute_dtype(), grad F32; either may
  // be undefined (zero2: gradients only), not both.
  struct Resident {
    int64_t begin = 0;
    Tensor weight, grad;
  };
  void set_resident(size_t slot, Resident r);
  void clear_resident(size_t slot);
  // What weight() returns: BF16 with a compute copy, else the master dtype.
  DType compute_dtype() const { return compute_.defined() ? DType::BF16 : flat_.dtype(); }
  bool has_compute_copy() const { return compute_.defined(); }
  // A complete master buffer (gathered for writing a checkpoint or an export, usually on the
  // host) that param(), tensors_for_writing() and export_tensors() read while it is set.
  void set_full_copy(Tensor full);
  void clear_full_copy() { full_copy_ = Tensor(); }
  // Deterministic init from (seed, parameter index, element index), computed in fp32 on the
  // host and rounded once (nearest even) for a BF16 store.
  void init(uint64_t seed);
  // The same for the listed parameters only (values equal to what init(seed) gives them).
  void init_params(uint64_t seed, const std::vector<size_t>& which);

  // Loads every parameter from Hugging Face tensors (any float dtype). Names for which
  // `ignorable` returns true may be absent from the table; any other unknown name, a
  // missing parameter or a wrong shape throws, naming the tensor and the source. A BF16
  // store rounds F32 values to bf16 (exact for values that came from bf16).
  void load(const SafetensorsFile& f, const std::function<bool(const std::string&)>& ignorable,
            const std::function<std::string(const std::string&)>& rename = nullptr);
  // Loads parameter i from sources[i] (a tensor of a memory-mapped safetensors file, F32, BF16
  // or F16), converted into the store's dtype in bounded chunks straight from the mapping; a
  // source with file == nullptr leaves its parameter as it is. Shapes are checked before
  // anything is written (an error names the file, the tensor and the parameter).
  struct Source {
    const MappedSafetensors* file = nullptr;
    const SafetensorsEntry* entry = nullptr;
  };
  void load_mapped(const std::vector<Source>& sources);
  // ---- Flat shards (checkpoints of fully sharded runs: each rank writes the part it holds) ----
  // Names and shapes of the layout, in order, as a short digest: a flat shard loads only into
  // the layout it was written from.
  std::string layout_digest() const;
  // What flat_shard_file writes: the held masters as tensor "flat" (in `dtype`), with their
  // range of the layout in the file's metadata.
  std::vector<SafetensorsSource> flat_shard_for_writing(DType dtype) const;
  std::map<std::string, std::string> flat_shard_metadata() const;
  // Fills the held range of the masters from flat shard files written by any number of ranks
  // (each covering [flat_begin, flat_end) of the same layout); throws naming the file when one
  // belongs to another layout, or naming the gap when the files leave part of the range out.
  void load_flat_shards(const std::vector<const MappedSafetensors*>& files);
  // Those files by path: model-rankR-of-W.safetensors of one run (a single W, ranks 0..W-1
  // all present: shards of two world sizes in one directory are refused, not mixed).
  void load_flat_shard_files(const std::vector<std::string>& paths);

  // Every parameter under its name as written to a file in `dtype` (views of the store, no
  // copies: write_safetensors_stream converts chunk by chunk).
  std::vector<SafetensorsSource> tensors_for_writing(DType dtype) const;
  // Parameters by name, converted to `dtype` on the CPU (BF16 → F32 is exact). Whole copies:
  // for tests and small models; files are written through tensors_for_writing.
  std::map<std::string, Tensor> export_tensors(DType dtype) const;

 private:
  std::vector<ParamSpec> specs_;
  std::vector<int64_t> offsets_;
  std::map<std::string, size_t> by_name_;
  int64_t total_ = 0;
  Tensor concat(bool grad, const std::vector<std::string>& names) const;
  Tensor span(bool grad, size_t first, size_t count) const;
  // The weight (or gradient) view of [offset, offset + numel(shape)) of the layout.
  Tensor locate(bool grad, int64_t offset, const Shape& shape) const;
  // The part of parameter i this store holds: its first element and a view of the master
  // buffer (undefined when it holds none of it).
  std::pair<int64_t, Tensor> held_part(size_t i) const;
  // Sets the master buffer (and the compute copy) from an F32 host buffer of total_ elements
  // (unsharded only).
  void set_from_host_f32(const Tensor& host);

  Tensor flat_, grad_flat_, compute_;
  Device device_ = Device::CPU;
  uint64_t version_ = 0;
  bool sharded_ = false;
  bool grads_sharded_ = false;  // (sharded_ implies it; zero2 has it alone)
  std::pair<int64_t, int64_t> held_{0, 0};
  std::pair<int64_t, int64_t> grad_held_{0, 0};
  std::vector<Resident> residents_;  // by slot (sharded parameters or gradients only)
  Tensor full_copy_;
};

}  // namespace biofm
