#include "biofm/train/checkpoint.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "biofm/io/atomic_file.h"
#include "biofm/io/checkpoint_manifest.h"
#include "biofm/io/safetensors.h"
#include "biofm/io/stream_file.h"

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

  void add(const std::string& name, FileDigest d) { files_[name] = {{"bytes", d.bytes}, {"crc32", d.crc32}}; }
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
    std::error_code ec;
    if (fs::exists(final_dir_)) fs::remove_all(final_dir_, ec);  // re-save of the same step
    fs::rename(tmp_dir_, final_dir_, ec);
    if (ec) fail("cannot move checkpoint into '", final_dir_, "': ", ec.message());
    done_ = true;
    fsync_dir(ckpt_dir_);
    auto all = list_checkpoints(ckpt_dir_);
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

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& ckpt_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(ckpt_dir, ec)) return out;
  for (auto& e : fs::directory_iterator(ckpt_dir, ec)) {
    int64_t step;
    if (!e.is_directory() || !parse_step_dir(e.path().filename().string(), step)) continue;
    if (!fs::exists(e.path() / "manifest.json")) continue;
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

std::string save_training_checkpoint(const std::string& ckpt_dir, const TrainerState& st, const LanguageModel& model,
                                     const AdamW& opt, int keep) {
  CheckpointWriter w(ckpt_dir, st.step);
  // model.safetensors + config.json + tokenizer files: the step directory is also a Hugging
  // Face model directory (biofm embed/eval --model ckpt/step_N).
  w.add("model.safetensors", write_safetensors_stream(w.path("model.safetensors"),
                                                      model.params().tensors_for_writing(DType::F32), {{"format", "pt"}}));
  std::vector<SafetensorsSource> moments;
  for (auto& [name, t] : opt.state()) moments.push_back({name, t, DType::F32});
  w.add("optimizer.safetensors", write_safetensors_stream(w.path("optimizer.safetensors"), moments));
  w.add_text("trainer_state.json", state_text(st.state_json, st.step, st.data_cursor));
  w.add_text("config.yaml", st.config_yaml);
  model.save_hf_metadata(w.tmp_dir());
  w.add_unlisted_files();
  return w.finish(keep);
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

void load_optimizer_file(const std::string& path, AdamW& opt) {
  MappedSafetensors f(path);
  for (const char* k : {"exp_avg", "exp_avg_sq"}) {
    const SafetensorsEntry* e = f.find(k);
    if (!e) fail(path, ": optimizer state has no '", k, "'");
    Tensor& dst = opt.moment(k);
    if (shape_numel(e->shape) != dst.numel())
      fail(path, ": optimizer state '", k, "' has ", shape_numel(e->shape), " elements, model needs ", dst.numel());
    f.copy_into(*e, dst);
  }
}

}  // namespace

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

std::optional<TrainerState> resume_training_checkpoint(const std::string& ckpt_dir, LanguageModel& model, AdamW& opt,
                                                       std::string* chosen_dir) {
  auto all = list_checkpoints(ckpt_dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const std::string& dir = it->second;
    // Any failure (verification, a malformed state, a model that does not fit) falls back to
    // the next older checkpoint; each one loaded overwrites every parameter and moment.
    try {
      const std::vector<std::string> names = verify_checkpoint(dir);
      for (const char* need : {"model.safetensors", "optimizer.safetensors", "trainer_state.json", "config.yaml"})
        if (std::find(names.begin(), names.end(), need) == names.end())
          fail(dir, "/manifest.json: does not list '", need, "'");
      TrainerState st;
      st.config_yaml = read_file(dir + "/config.yaml");
      st.state_json = read_file(dir + "/trainer_state.json");
      const TrainerStateFields f = parse_trainer_state(st.state_json, dir + "/trainer_state.json", it->first);
      st.step = f.step;
      st.data_cursor = f.data_cursor;
      load_model_file(dir + "/model.safetensors", model.params());
      load_optimizer_file(dir + "/optimizer.safetensors", opt);
      opt.set_steps_taken(st.step);
      if (chosen_dir) *chosen_dir = dir;
      return st;
    } catch (const Error& e) {
      std::cerr << "warning: skipping checkpoint " << dir << ": " << e.what() << "\n";
    }
  }
  return std::nullopt;
}

}  // namespace biofm
