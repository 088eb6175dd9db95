#include "biofm/train/checkpoint.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "biofm/io/atomic_file.h"
#include "biofm/io/safetensors.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace biofm {

namespace {

uint32_t crc32_of(const std::string& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  size_t done = 0;
  while (done < bytes.size()) {
    uInt chunk = uInt(std::min<size_t>(bytes.size() - done, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + done), chunk);
    done += chunk;
  }
  return uint32_t(crc);
}

bool parse_step_dir(const std::string& name, int64_t& step) {
  if (name.rfind("step_", 0) != 0 || name.size() == 5) return false;
  for (size_t i = 5; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  step = std::stoll(name.substr(5));
  return true;
}

}  // namespace

std::string save_checkpoint(const std::string& ckpt_dir, const CheckpointContents& c, int keep) {
  make_dirs_writable(ckpt_dir);
  const std::string final_dir = (fs::path(ckpt_dir) / ("step_" + std::to_string(c.step))).string();
  const std::string tmp_dir =
      (fs::path(ckpt_dir) / (".tmp_step_" + std::to_string(c.step) + "." + std::to_string(::getpid()))).string();
  fs::remove_all(tmp_dir);
  make_dirs_writable(tmp_dir);

  json manifest = {{"format", "biofm-checkpoint-v1"}, {"step", c.step}, {"files", json::object()}};
  auto add_file = [&](const std::string& name) {
    std::string bytes = read_file(tmp_dir + "/" + name);
    manifest["files"][name] = {{"bytes", bytes.size()}, {"crc32", crc32_of(bytes)}};
  };
  for (auto& [stem, tensors] : c.files) {
    write_safetensors(tmp_dir + "/" + stem + ".safetensors", tensors);
    add_file(stem + ".safetensors");
  }
  json state = c.state_json.empty() ? json::object() : json::parse(c.state_json);
  state["step"] = c.step;
  state["data_cursor"] = c.data_cursor;
  write_file_atomic(tmp_dir + "/trainer_state.json", state.dump(2) + "\n");
  add_file("trainer_state.json");
  write_file_atomic(tmp_dir + "/config.yaml", c.config_yaml);
  add_file("config.yaml");
  // The manifest is written last: a directory without one is never a checkpoint.
  write_file_atomic(tmp_dir + "/manifest.json", manifest.dump(2) + "\n");
  fsync_dir(tmp_dir);

  std::error_code ec;
  if (fs::exists(final_dir)) fs::remove_all(final_dir, ec);  // re-save of the same step
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) fail("cannot move checkpoint into '", final_dir, "': ", ec.message());
  fsync_dir(ckpt_dir);

  auto all = list_checkpoints(ckpt_dir);
  if (keep > 0 && int(all.size()) > keep)
    for (size_t i = 0; i + size_t(keep) < all.size(); ++i) fs::remove_all(all[i].second, ec);
  return final_dir;
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
  json manifest;
  std::string mpath = step_dir + "/manifest.json";
  try {
    manifest = json::parse(read_file(mpath));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(mpath, ": corrupt manifest: ", e.what());
  }
  CheckpointContents c;
  for (auto& [name, info] : manifest.at("files").items()) {
    std::string path = step_dir + "/" + name;
    std::string bytes = read_file(path);
    if (bytes.size() != info.at("bytes").get<size_t>() || crc32_of(bytes) != info.at("crc32").get<uint32_t>())
      fail("checkpoint file '", path, "' is corrupt (size or CRC32 differs from the manifest)");
    if (name == "config.yaml") {
      c.config_yaml = bytes;
    } else if (name == "trainer_state.json") {
      json st = json::parse(bytes);
      c.step = st.at("step").get<int64_t>();
      c.data_cursor = st.at("data_cursor").get<uint64_t>();
      c.state_json = bytes;
    } else if (name.size() > 12 && name.substr(name.size() - 12) == ".safetensors") {
      c.files[name.substr(0, name.size() - 12)] = read_safetensors(path).tensors;
    }
  }
  return c;
}

std::optional<CheckpointContents> load_latest_checkpoint(const std::string& ckpt_dir,
                                                         std::string* chosen_dir) {
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
  CheckpointContents c;
  c.step = st.step;
  c.data_cursor = st.data_cursor;
  c.config_yaml = st.config_yaml;
  c.state_json = st.state_json;
  c.files["model"] = model.params().export_tensors(DType::F32);
  c.files["optimizer"] = opt.state();
  return save_checkpoint(ckpt_dir, c, keep);
}

std::optional<TrainerState> resume_training_checkpoint(const std::string& ckpt_dir, LanguageModel& model, AdamW& opt,
                                                       std::string* chosen_dir) {
  std::string chosen;
  std::optional<CheckpointContents> c = load_latest_checkpoint(ckpt_dir, &chosen);
  if (!c) return std::nullopt;
  SafetensorsFile f;
  f.tensors = c->files.at("model");
  f.source = chosen + "/model.safetensors";
  model.params().load(f, nullptr);
  opt.load_state(c->files.at("optimizer"), c->step);
  if (chosen_dir) *chosen_dir = chosen;
  return TrainerState{c->step, c->data_cursor, c->state_json, c->config_yaml};
}

}  // namespace biofm
