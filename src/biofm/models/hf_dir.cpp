#include "biofm/models/hf_dir.h"

#include <filesystem>

#include "biofm/io/atomic_file.h"
#include "biofm/io/safetensors.h"

namespace biofm {

HfDirContents read_hf_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  HfDirContents c;
  c.dir = dir;
  c.config_path = (fs::path(dir) / "config.json").string();
  const std::string weights = (fs::path(dir) / "model.safetensors").string();
  if (!fs::exists(c.config_path)) fail("'", dir, "' is not a Hugging Face model directory: no config.json");
  if (!fs::exists(weights))
    fail("'", dir, "': no model.safetensors (sharded or pytorch_model.bin checkpoints are not supported; "
         "re-save with transformers' save_pretrained(safe_serialization=True, max_shard_size large enough))");
  c.weight_files = {weights};
  c.config_json = read_file(c.config_path);
  return c;
}

void load_hf_weights(ParamStore& store, const HfDirContents& hf, const HfNaming& naming) {
  SafetensorsFile f = read_safetensors(hf.weight_files.at(0));
  const std::string prefix = naming.prefix;
  auto rename = [prefix](const std::string& n) {
    if (n.rfind(prefix, 0) == 0 || n.rfind("lm_head.", 0) == 0) return n;
    return prefix + n;
  };
  store.load(f, naming.ignorable, rename);
}

void save_hf_weights(const ParamStore& store, const std::string& dir) {
  write_safetensors(dir + "/model.safetensors", store.export_tensors(DType::F32), {{"format", "pt"}});
}

}  // namespace biofm
