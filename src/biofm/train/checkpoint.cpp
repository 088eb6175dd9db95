#include "biofm/train/checkpoint.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <yaml-cpp/yaml.h>

#include "biofm/io/atomic_file.h"
#include "biofm/io/checkpoint_manifest.h"
#include "biofm/dist/coordinator.h"
#include "biofm/io/safetensors.h"
#include "biofm/io/stream_file.h"
#include "biofm/ops/gemm/tuning.h"
#include "biofm/ops/options.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace biofm {

namespace {

bool parse_step_dir(const std::string& name, int64_t& step) {
  // At most 18 digits: every such number fits in int64.
  if (name.rfind("step_", 0) != 0 || name.size() == 5 || name.size() > 5 + 18) return false;
  for (size_t i = 5; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  step = std::stoll(name.substr(5));
  return true;
}

// Step directories this process found unusable when resuming (resume_training_checkpoint):
// rotation neither counts nor deletes them, so they do not push out the valid ones.
std::set<std::string>& unusable_checkpoints() {
  static std::set<std::string> dirs;
  return dirs;
}

// Test hook (tools/soak.sh, docs/HARDENING.md): BIOFM_TEST_SLOW_CHECKPOINT_MS=N pauses N ms
// after each file of a checkpoint is written, so that a kill lands inside a save. Unset in
// normal use (no pause).
void pause_for_tests() {
  static const long ms = [] {
    const char* v = std::getenv("BIOFM_TEST_SLOW_CHECKPOINT_MS");
    return v ? std::strtol(v, nullptr, 10) : 0L;
  }();
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// A step directory under construction: files are written into a hidden temporary directory,
// each recorded in the manifest with the size and CRC32 computed while it was written; finish()
// writes the manifest last and renames the directory into place.
class CheckpointWriter {
 public:
  CheckpointWriter(const std::string& ckpt_dir, int64_t step) : ckpt_dir_(ckpt_dir), step_(step) {
    make_dirs_writable(ckpt_dir);
    final_dir_ = (fs::path(ckpt_dir) / ("step_" + std::to_string(step))).string();
    tmp_dir_ = (fs::path(ckpt_dir) / (".tmp_step_" + std::to_string(step) + "." + std::to_string(::getpid()))).string();
    fs::remove_all(tmp_dir_);
    make_dirs_writable(tmp_dir_);
  }
  ~CheckpointWriter() {
    std::error_code ec;
    if (!done_) fs::remove_all(tmp_dir_, ec);
  }
  std::string path(const std::string& name) const { return tmp_dir_ + "/" + name; }
  const std::string& tmp_dir() const { return tmp_dir_; }

  void add(const std::string& name, FileDigest d) {
    files_[name] = {{"bytes", d.bytes}, {"crc32", d.crc32}};
    pause_for_tests();
  }
  void add_text(const std::string& name, const std::string& text) {
    AtomicFileWriter w(path(name));
    w.write(text.data(), text.size());
    w.commit();
    add(name, {w.bytes(), w.crc32()});
  }
  // Files others wrote into the directory (e.g. the model's config.json and tokenizer files).
  void add_unlisted_files() {
    for (auto& e : fs::directory_iterator(tmp_dir_)) {
      const std::string name = e.path().filename().string();
      if (!e.is_regular_file() || files_.contains(name)) continue;
      MappedFile m(e.path().string());
      add(name, {m.size(), m.crc32()});
    }
  }

  std::string finish(int keep) {
    json manifest = {{"format", "biofm-checkpoint-v1"}, {"step", step_}, {"files", files_}};
    // The manifest is written last: a directory without one is never a checkpoint.
    write_file_atomic(path("manifest.json"), manifest.dump(2) + "\n");
    fsync_dir(tmp_dir_);
    pause_for_tests();
    std::error_code ec;
    if (fs::exists(final_dir_)) fs::remove_all(final_dir_, ec);  // re-save of the same step
    fs::rename(tmp_dir_, final_dir_, ec);
    if (ec) fail("cannot move checkpoint into '", final_dir_, "': ", ec.message());
    done_ = true;
    fsync_dir(ckpt_dir_);
    unusable_checkpoints().erase(final_dir_);  // (an unusable one of this step was replaced)
    auto all = list_checkpoints(ckpt_dir_);
    std::erase_if(all, [](const auto& c) { return unusable_checkpoints().contains(c.second); });
    if (keep > 0 && int(all.size()) > keep)
      for (size_t i = 0; i + size_t(keep) < all.size(); ++i) fs::remove_all(all[i].second, ec);
    return final_dir_;
  }

 private:
  std::string ckpt_dir_, final_dir_, tmp_dir_;
  int64_t step_;
  json files_ = json::object();
  bool done_ = false;
};

std::string state_text(const std::string& state_json, int64_t step, uint64_t cursor) {
  json state = state_json.empty() ? json::object() : json::parse(state_json);
  state["step"] = step;
  state["data_cursor"] = cursor;
  return state.dump(2) + "\n";
}

// Checks every file of the manifest (size, and CRC32 streamed over a mapping); returns the
// manifest's file names.
std::vector<std::string> verify_checkpoint(const std::string& step_dir) {
  const std::string mpath = step_dir + "/manifest.json";
  std::error_code ec;
  if (!fs::exists(mpath, ec))
    fail(mpath, " is missing (a checkpoint's manifest is written last: this one is incomplete or damaged)");
  std::vector<std::string> names;
  for (const ManifestFile& f : parse_checkpoint_manifest(read_file(mpath), mpath)) {
    const std::string path = step_dir + "/" + f.name;
    MappedFile m(path);
    if (m.size() != f.bytes || m.crc32() != f.crc32)
      fail("checkpoint file '", path, "' is corrupt (size or CRC32 differs from the manifest)");
    names.push_back(f.name);
  }
  return names;
}

}  // namespace

std::string save_checkpoint(const std::string& ckpt_dir, const CheckpointContents& c, int keep) {
  CheckpointWriter w(ckpt_dir, c.step);
  for (auto& [stem, tensors] : c.files) {
    std::vector<SafetensorsSource> src;
    for (auto& [name, t] : tensors) src.push_back({name, t, t.dtype()});
    const std::string file = stem + ".safetensors";
    w.add(file, write_safetensors_stream(w.path(file), src));
  }
  w.add_text("trainer_state.json", state_text(c.state_json, c.step, c.data_cursor));
  w.add_text("config.yaml", c.config_yaml);
  return w.finish(keep);
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& ckpt_dir, bool incomplete) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(ckpt_dir, ec)) return out;
  for (auto& e : fs::directory_iterator(ckpt_dir, ec)) {
    int64_t step;
    if (!e.is_directory() || !parse_step_dir(e.path().filename().string(), step)) continue;
    if (!fs::exists(e.path() / "manifest.json") && (!incomplete || fs::is_empty(e.path(), ec))) continue;
    out.push_back({step, e.path().string()});
  }
  std::sort(out.begin(), out.end());
  return out;
}

CheckpointContents load_checkpoint(const std::string& step_dir) {
  CheckpointContents c;
  for (const std::string& name : verify_checkpoint(step_dir)) {
    const std::string path = step_dir + "/" + name;
    if (name == "config.yaml") {
      c.config_yaml = read_file(path);
    } else if (name == "trainer_state.json") {
      c.state_json = read_file(path);
      const TrainerStateFields st = parse_trainer_state(c.state_json, path);
      c.step = st.step;
      c.data_cursor = st.data_cursor;
    } else if (name.size() > 12 && name.substr(name.size() - 12) == ".safetensors") {
      c.files[name.substr(0, name.size() - 12)] = read_safetensors(path).tensors;
    }
  }
  return c;
}

std::optional<CheckpointContents> load_latest_checkpoint(const std::string& ckpt_dir, std::string* chosen_dir) {
  auto all = list_checkpoints(ckpt_dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      CheckpointContents c = load_checkpoint(it->second);
      if (chosen_dir) *chosen_dir = it->second;
      return c;
    } catch (const Error& e) {
      std::cerr << "warning: skipping checkpoint " << it->second << ": " << e.what() << "\n";
    }
  }
  return std::nullopt;
}

static std::string shard_file(const char* what, int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof name, "%s-rank%05d-of-%05d.safetensors", what, rank, world);
  return name;
}

std::string save_training_checkpoint(const std::string& ckpt_dir, const TrainerState& st, const LanguageModel& model,
                                     const AdamW& opt, int keep, Coordinator* ranks) {
  model.settle_weights();  // (an optimizer update still owed, AdamW::apply_ahead_in: parameters and moments)
  const int rank = ranks ? ranks->rank() : 0, world = ranks ? ranks->world_size() : 1;
  // Rank 0 owns the directory; the others learn where it is and write their shards into it.
  std::unique_ptr<CheckpointWriter> w;
  if (rank == 0) w = std::make_unique<CheckpointWriter>(ckpt_dir, st.step);
  const std::string tmp_dir = ranks ? ranks->all_gather(w ? w->tmp_dir() : "")[0] : w->tmp_dir();

  // The optimizer: one file, or (sharded) one per rank written in parallel, each holding the
  // moments of flat elements [flat_begin, flat_end). The model likewise when its parameters are
  // sharded (fsdp): each rank writes the masters it holds, nobody gathers them.
  json mine = json::array();
  auto write_mine = [&](const std::string& name, const std::vector<SafetensorsSource>& tensors,
                        const std::map<std::string, std::string>& metadata) {
    const FileDigest d = write_safetensors_stream(tmp_dir + "/" + name, tensors, metadata);
    mine.push_back({{"name", name}, {"bytes", d.bytes}, {"crc32", d.crc32}});
  };
  if (opt.sharded()) {
    std::vector<SafetensorsSource> moments;
    for (auto& [k, t] : opt.state()) moments.push_back({k, t, DType::F32});
    const auto [b, e] = opt.shard();
    write_mine(shard_file("optimizer", rank, world), moments,
               {{"flat_begin", std::to_string(b)}, {"flat_end", std::to_string(e)},
                {"flat_numel", std::to_string(model.params().numel())}});
  }
  const bool model_sharded = model.params().sharded();
  if (model_sharded)
    write_mine(shard_file("model", rank, world), model.params().flat_shard_for_writing(model.params().dtype()),
               model.params().flat_shard_metadata());
  const std::vector<std::string> shards = ranks ? ranks->all_gather(mine.dump()) : std::vector<std::string>{mine.dump()};
  std::string final_dir;
  if (w) {
    for (const std::string& text : shards)
      for (const json& f : json::parse(text))
        w->add(f["name"].get<std::string>(), {f["bytes"].get<uint64_t>(), f["crc32"].get<uint32_t>()});
    // model.safetensors + config.json + tokenizer files: the step directory is also a Hugging
    // Face model directory (biofm embed/eval --model ckpt/step_N; from model shards too).
    if (!model_sharded)
      w->add("model.safetensors", write_safetensors_stream(w->path("model.safetensors"),
                                                           model.params().tensors_for_writing(DType::F32),
                                                           {{"format", "pt"}}));
    if (!opt.sharded()) {
      std::vector<SafetensorsSource> moments;
      for (auto& [name, t] : opt.state()) moments.push_back({name, t, DType::F32});
      w->add("optimizer.safetensors", write_safetensors_stream(w->path("optimizer.safetensors"), moments));
    }
    if (const auto qs = model.quant_state(); !qs.empty()) {  // DelayedScaling's and FP8 attention's state
      std::vector<SafetensorsSource> src;
      for (const auto& [name, t] : qs) src.push_back({name, t, DType::F32});
      w->add("fp8_state.safetensors", write_safetensors_stream(w->path("fp8_state.safetensors"), src));
    }
    // ops.gemm_autotune's choices, so that a resumed run runs the same GEMM algorithms (tuning.h).
    if (const std::string table = ops::gemm_tuning_table(); !table.empty()) w->add_text("gemm_tuning.bin", table);
    w->add_text("trainer_state.json", state_text(st.state_json, st.step, st.data_cursor));
    w->add_text("config.yaml", st.config_yaml);
    model.save_hf_metadata(w->tmp_dir());
    w->add_unlisted_files();
    final_dir = w->finish(keep);
  }
  // Nobody goes on (or exits, after a stop signal) before the checkpoint is in place.
  return ranks ? ranks->all_gather(final_dir)[0] : final_dir;
}

namespace {

void load_model_file(const std::string& path, ParamStore& store) {
  MappedSafetensors f(path);
  std::vector<ParamStore::Source> sources(store.size());
  for (const SafetensorsEntry& e : f.entries()) {
    size_t i;
    try {
      i = store.index(e.name);
    } catch (const Error&) {
      fail(path, ": unexpected tensor '", e.name, "' (not a parameter of this model)");
    }
    sources[i] = {&f, &e};
  }
  for (size_t i = 0; i < store.size(); ++i)
    if (!sources[i].file) fail(path, ": missing parameter '", store.spec(i).name, "'");
  store.load_mapped(sources);
}

// The model from model.safetensors, or from the model shards of a fully sharded run (written
// by any number of ranks).
void load_model_files(const std::string& dir, const std::vector<std::string>& names, ParamStore& store) {
  if (std::find(names.begin(), names.end(), "model.safetensors") != names.end())
    return load_model_file(dir + "/model.safetensors", store);
  std::vector<std::string> shards;
  for (const std::string& name : names)
    if (name.rfind("model-rank", 0) == 0) shards.push_back(dir + "/" + name);
  if (shards.empty()) fail(dir, "/manifest.json: lists neither model.safetensors nor model shards");
  store.load_flat_shard_files(shards);
}

// This optimizer's moments (its shard, or everything) from optimizer.safetensors or from the
// per-rank shard files of a run with any number of ranks.
void load_optimizer_state(const std::string& dir, const std::vector<std::string>& names, AdamW& opt, int64_t numel) {
  const auto [begin, end] = opt.shard();
  if (std::find(names.begin(), names.end(), "optimizer.safetensors") != names.end()) {
    const std::string path = dir + "/optimizer.safetensors";
    MappedSafetensors f(path);
    for (const char* k : {"exp_avg", "exp_avg_sq"}) {
      const SafetensorsEntry* e = f.find(k);
      if (!e) fail(path, ": optimizer state has no '", k, "'");
      if (shape_numel(e->shape) != numel)
        fail(path, ": optimizer state '", k, "' has ", shape_numel(e->shape), " elements, model needs ", numel);
      f.copy_range_into(*e, begin, opt.moment(k));
    }
    return;
  }
  int64_t covered = 0;  // elements of [begin, end) found
  for (const std::string& name : names) {
    if (name.rfind("optimizer-rank", 0) != 0) continue;
    const std::string path = dir + "/" + name;
    MappedSafetensors f(path);
    int64_t fb = 0, fe = 0, fn = 0;
    try {
      fb = std::stoll(f.metadata().at("flat_begin"));
      fe = std::stoll(f.metadata().at("flat_end"));
      fn = std::stoll(f.metadata().at("flat_numel"));
    } catch (const std::exception&) {
      fail(path, ": optimizer shard without valid flat_begin/flat_end/flat_numel metadata");
    }
    if (fn != numel) fail(path, ": optimizer shard of a model with ", fn, " parameters; this one has ", numel);
    const int64_t a = std::max(begin, fb), b = std::min(end, fe);
    if (a >= b) continue;
    for (const char* k : {"exp_avg", "exp_avg_sq"}) {
      const SafetensorsEntry* e = f.find(k);
      if (!e || shape_numel(e->shape) != fe - fb) fail(path, ": optimizer state '", k, "' is missing or mis-sized");
      f.copy_range_into(*e, a - fb, opt.moment(k).flat_slice(a - begin, {b - a}));
    }
    covered += b - a;
  }
  if (covered != end - begin)
    fail(dir, ": the optimizer files cover ", covered, " of the ", end - begin, " moments this rank needs");
}

// The model's quantization state (DelayedScaling, FP8 attention) from fp8_state.safetensors; a checkpoint
// without it (another recipe before), or with a tensor of another shape (another amax_history_len or
// other FP8 layers), leaves that state fresh, with a note: the run resumes its weights and moments.
// State the checkpoint holds that this run has no place for (it ran DelayedScaling or FP8 attention,
// this run does not) is dropped, said in `notes`.
void load_quant_state(const std::string& dir, const std::vector<std::string>& names, LanguageModel& model,
                      std::vector<std::string>& notes) {
  const auto state = model.quant_state();
  const bool saved = std::find(names.begin(), names.end(), "fp8_state.safetensors") != names.end();
  if (saved) {
    const std::string path = dir + "/fp8_state.safetensors";
    const MappedSafetensors f(path);
    const auto used = [&](const char* name) {
      return std::any_of(state.begin(), state.end(), [&](const auto& s) { return s.first == name; });
    };
    if (f.find("fp8.delayed.amax_history") && !used("fp8.delayed.amax_history"))
      notes.push_back("the checkpoint's DelayedScaling state (amax histories and scales, " + path +
                      ") is not used: this run has no DelayedScaling layers (fp8_config.fp8_recipe)");
    if (f.find("fp8.attention.state") && !used("fp8.attention.state"))
      notes.push_back("the checkpoint's FP8 attention state (" + path +
                      ") is not used: this run has no FP8 attention (fp8_config.fp8_recipe_kwargs.fp8_dpa)");
  }
  if (state.empty()) return;
  if (!saved) {
    std::cerr << "note: " << dir << " has no fp8_state.safetensors: the quantization state (DelayedScaling's amax histories, FP8 attention's scales) starts fresh\n";
    return;
  }
  const std::string path = dir + "/fp8_state.safetensors";
  MappedSafetensors f(path);
  for (const auto& [name, t] : state) {
    const SafetensorsEntry* e = f.find(name);
    if (!e) {  // a recipe or fp8_dpa turned on since: that state starts fresh
      std::cerr << "note: " << path << " has no '" << name << "': it starts fresh"
                << (name == "fp8.attention.state" ? " (each layer's attention calibrates again)" : "") << "\n";
      if (name == "fp8.attention.state") Tensor(t).zero_();
      continue;
    }
    if (e->shape != t.shape()) {  // (amax_history_len or the layers' recipes changed since): as if absent
      std::cerr << "note: " << path << ": '" << name << "' is " << shape_str(e->shape) << ", this run's is "
                << shape_str(t.shape()) << " (amax_history_len or the layers' recipes changed since this checkpoint): "
                << "it starts fresh; the weights and the optimizer state resume\n";
      if (name == "fp8.attention.state") Tensor(t).zero_();
      continue;
    }
    f.copy_into(*e, t);
  }
  model.quant_state_loaded();
}

// The checkpoint's GEMM algorithm choices, where this run tunes GEMMs on the GPU; -1 when it
// does not use them (a note says why, where a table was there). A table this build cannot read
// (e.g. written by a biofm with another table layout) is not a reason to give up the checkpoint:
// it is noted and ignored like one from another GPU.
int64_t load_gemm_tuning(const std::string& dir, const std::vector<std::string>& names, const LanguageModel& model) {
  if (!ops::op_options().gemm_autotune || model.device() != Device::CUDA) return -1;
  if (std::find(names.begin(), names.end(), "gemm_tuning.bin") == names.end()) return -1;
  std::string why;
  int64_t n = -1;
  try {
    n = ops::load_gemm_tuning_table(read_file(dir + "/gemm_tuning.bin"), &why);
  } catch (const Error& e) {
    why = e.what();
  }
  if (n < 0)
    std::cerr << "note: " << dir << "/gemm_tuning.bin not used (" << why
              << "): GEMMs are tuned again, so steps may differ in the last bits from the run that saved it\n";
  return n;
}

}  // namespace

void probe_checkpoint_dir(const std::string& ckpt_dir) {
  // (named like a save's temporary directory: one a kill leaves behind is removed at the next start)
  const std::string probe = (fs::path(ckpt_dir) / (".tmp_step_probe." + std::to_string(::getpid()))).string();
  std::error_code ec;
  try {
    fs::remove_all(probe, ec);
    if (!fs::create_directory(probe, ec) || ec) fail("cannot create directory '", probe, "': ", ec.message());
    write_file_atomic(probe + "/probe", "biofm\n");
  } catch (const Error& e) {
    fs::remove_all(probe, ec);
    fail("the checkpoint directory ", ckpt_dir, " (checkpoint.ckpt_dir, else output_dir/checkpoints) is not writable: ",
         e.what(), "; choose another before training starts");
  }
  fs::remove_all(probe, ec);
}

void remove_stale_tmp_dirs(const std::string& ckpt_dir) {
  std::error_code ec;
  if (!fs::is_directory(ckpt_dir, ec)) return;
  std::vector<fs::path> stale;
  for (auto& e : fs::directory_iterator(ckpt_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".tmp_step_", 0) != 0) continue;
    // .tmp_step_<step>.<pid>: a directory of a live process other than this one is in use.
    const size_t dot = name.rfind('.');
    const long pid = dot > 0 ? std::strtol(name.c_str() + dot + 1, nullptr, 10) : 0;
    if (pid > 0 && pid != long(::getpid()) && (::kill(pid_t(pid), 0) == 0 || errno == EPERM)) continue;
    stale.push_back(e.path());
  }
  for (const fs::path& p : stale) {
    fs::remove_all(p, ec);
    std::printf("removed an incomplete checkpoint left by an interrupted save: %s\n", p.string().c_str());
  }
}

namespace {

// A resolved config (config.yaml, to_yaml), or a null node when it does not parse: the checks
// below then find nothing (the checkpoint is judged by its tensors).
YAML::Node parse_config_yaml(const std::string& yaml) {
  try {
    return YAML::Load(yaml);
  } catch (const std::exception&) {
    return YAML::Node();
  }
}

// Each key of the model section (model.config's one level down) whose value differs between two
// resolved configs, as "model.config.hidden_size: 32 in the checkpoint, 64 now"; the keys that
// only shape initialization, and init_from, aside, and a key only one of them has. "" when none.
std::string model_differences(const YAML::Node& saved_config, const YAML::Node& current_config) {
  static const std::set<std::string> kInitOnly = {"init_from", "initializer_range", "embedding_init_std", "scaled_init"};
  std::string out;
  auto compare = [&](const YAML::Node& a, const YAML::Node& b, const std::string& prefix, auto&& self) -> void {
    std::set<std::string> keys;
    for (const auto& kv : a) keys.insert(kv.first.as<std::string>());
    for (const auto& kv : b) keys.insert(kv.first.as<std::string>());
    for (const std::string& k : keys) {
      if (kInitOnly.count(k)) continue;
      const YAML::Node x = a[k], y = b[k];
      if (!x || !y) continue;  // (a key one of the two biofm versions did not have)
      if (x.IsMap() && y.IsMap()) {
        self(x, y, prefix + k + ".", self);
        continue;
      }
      const std::string xs = YAML::Dump(x), ys = YAML::Dump(y);
      if (xs != ys) out += (out.empty() ? "" : "; ") + prefix + k + ": " + xs + " in the checkpoint, " + ys + " now";
    }
  };
  if (!saved_config.IsMap() || !current_config.IsMap()) return "";
  const YAML::Node saved = saved_config["model"], now = current_config["model"];
  if (saved.IsMap() && now.IsMap()) compare(saved, now, "model.", compare);
  return out;
}

// config[section][key] (or config[key]) as text; "" when absent or not a scalar.
std::string yaml_scalar(const YAML::Node& config, const char* section, const char* key) {
  if (!config.IsMap()) return "";
  const YAML::Node n = section ? config[section][key] : config[key];
  return n && n.IsScalar() ? n.as<std::string>() : "";
}

// config[section][key] (or config[key]) as text, a list as "[a, b]"; "" when absent.
std::string yaml_text(const YAML::Node& config, const char* section, const char* key) {
  if (!config.IsMap()) return "";
  const YAML::Node n = section ? config[section][key] : config[key];
  if (!n || !n.IsSequence()) return n && n.IsScalar() ? n.as<std::string>() : "";
  std::string s;
  for (const auto& item : n)
    s += (s.empty() ? "" : ", ") + (item.IsScalar() ? item.as<std::string>() : YAML::Dump(item));
  return "[" + s + "]";
}

}  // namespace

std::vector<std::string> resume_differences(const std::string& saved_yaml, const std::string& current_yaml) {
  const YAML::Node saved = parse_config_yaml(saved_yaml), now = parse_config_yaml(current_yaml);
  std::vector<std::string> out;
  const std::string seed_then = yaml_scalar(saved, nullptr, "seed"), seed_now = yaml_scalar(now, nullptr, "seed");
  if (!seed_then.empty() && seed_then != seed_now)
    out.push_back("seed=" + seed_now + " here, " + seed_then + " in the checkpoint's run: the data order and masking from "
                  "here on follow seed " + seed_now);
  const std::string path_then = yaml_scalar(saved, "dataset", "path"), path_now = yaml_scalar(now, "dataset", "path");
  if (!path_then.empty() && path_then != path_now)
    out.push_back("dataset.path differs from the checkpoint's run (" + path_then + "): its data cursor now counts samples "
                  "of " + path_now);
  // Training hyper-parameters (changing them may be meant, so notes, not errors). grad_acc_steps
  // is the trainer's to note, with the data-parallel ranks: what matters is the global batch.
  const bool decays =  // (a constant schedule depends on neither num_train_steps nor the decay keys)
      yaml_scalar(saved, "scheduler", "type") != "constant" || yaml_scalar(now, "scheduler", "type") != "constant";
  const bool packed = yaml_scalar(now, "dataset", "packing") != "bshd";
  const std::string schedule = "the learning-rate schedule is recomputed with it, so the learning rate may jump here";
  const std::string batches = "the batches from here on differ from an uninterrupted run's";
  const struct {
    const char* section;
    const char* key;
    bool applies;
    std::string effect;
  } keys[] = {
      {"optimizer", "lr", true, "the updates from here on use it"},
      {"optimizer", "betas", true, "the updates from here on use them"},
      {"optimizer", "eps", true, "the updates from here on use it"},
      {"optimizer", "weight_decay", true, "the updates from here on use it"},
      {nullptr, "clip_grad_norm", true, "gradients from here on are clipped with it"},
      {nullptr, "num_train_steps", decays, schedule},
      {"scheduler", "type", true, schedule},
      {"scheduler", "warmup_steps", true, schedule},
      {"scheduler", "decay_fraction", decays, schedule},
      {"scheduler", "min_lr_ratio", decays, schedule},
      {"dataset", "packing", true, batches},
      {"dataset", "max_tokens_per_batch", packed, batches},
      {"dataset", "micro_batch_size", !packed, batches},
      {"dataset", "max_seq_length", true, batches},
      {"dataset", "mlm_probability", true, "masked-LM batches from here on mask with it"},
  };
  for (const auto& k : keys) {
    const std::string then = yaml_text(saved, k.section, k.key), here = yaml_text(now, k.section, k.key);
    if (!k.applies || then.empty() || here.empty() || then == here) continue;
    const std::string name = k.section ? std::string(k.section) + "." + k.key : std::string(k.key);
    out.push_back(name + "=" + here + " here, " + then + " in the checkpoint's run: " + k.effect);
  }
  return out;
}

std::optional<TrainerState> resume_training_checkpoint(const std::string& ckpt_dir, LanguageModel& model, AdamW& opt,
                                                       std::string* chosen_dir, const std::string& current_config_yaml) {
  auto all = list_checkpoints(ckpt_dir, /*incomplete=*/true);
  const YAML::Node current = parse_config_yaml(current_config_yaml);  // (null when not given)
  std::string other_model, other_dir;  // a checkpoint of another model: fails the resume (below)
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const std::string& dir = it->second;
    // Any failure (verification, a malformed state, a model that does not fit) falls back to
    // the next older checkpoint; each one loaded overwrites every parameter and moment.
    try {
      const std::vector<std::string> names = verify_checkpoint(dir);
      for (const char* need : {"trainer_state.json", "config.yaml"})
        if (std::find(names.begin(), names.end(), need) == names.end())
          fail(dir, "/manifest.json: does not list '", need, "'");
      TrainerState st;
      st.config_yaml = read_file(dir + "/config.yaml");
      if (!current_config_yaml.empty()) {
        other_model = model_differences(parse_config_yaml(st.config_yaml), current);
        if (!other_model.empty()) {
          other_dir = dir;
          break;
        }
      }
      st.state_json = read_file(dir + "/trainer_state.json");
      const TrainerStateFields f = parse_trainer_state(st.state_json, dir + "/trainer_state.json", it->first);
      st.step = f.step;
      st.data_cursor = f.data_cursor;
      load_model_files(dir, names, model.params());
      load_optimizer_state(dir, names, opt, model.params().numel());
      load_quant_state(dir, names, model, st.notes);
      st.gemm_choices = load_gemm_tuning(dir, names, model);
      opt.set_steps_taken(st.step);
      if (chosen_dir) *chosen_dir = dir;
      return st;
    } catch (const Error& e) {
      std::cerr << "warning: skipping checkpoint " << dir << ": " << e.what()
                << " (left in place; checkpoint rotation does not count it)\n";
      unusable_checkpoints().insert(dir);
    }
  }
  if (!other_model.empty())
    fail("the checkpoint ", other_dir, " was written for another model (", other_model,
         "): resuming it would train another model, and starting over would overwrite that run's checkpoints; use "
         "another output_dir (or checkpoint.ckpt_dir) for this model, or that run's model settings");
  return std::nullopt;
}

}  // namespace biofm
