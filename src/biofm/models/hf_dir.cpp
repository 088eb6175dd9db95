#include "biofm/models/hf_dir.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "biofm/core/notes.h"
#include "biofm/io/atomic_file.h"
#include "biofm/io/safetensors.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace biofm {

namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

// transformers renames keys containing "gamma" / "beta" on load (LayerNorm's old names).
std::string legacy_rename(std::string n) {
  for (auto [from, to] : {std::pair<const char*, const char*>{"gamma", "weight"}, {"beta", "bias"}}) {
    size_t at;
    while ((at = n.find(from)) != std::string::npos) n.replace(at, std::string(from).size(), to);
  }
  return n;
}

// What kind of non-parameter tensor a name is ("" when it is none of the known kinds).
std::string builtin_ignored_kind(const std::string& n) {
  if (n.find("contact_head.") != std::string::npos) return "contact-head";
  if (ends_with(n, "inv_freq")) return "rotary inv_freq";
  if (ends_with(n, "position_ids")) return "position_ids";
  if (starts_with(n, "pooler.") || n.find(".pooler.") != std::string::npos) return "pooler";
  return "";
}

}  // namespace

namespace {

// model-rankR-of-W.safetensors files of a fully sharded training checkpoint, sorted.
std::vector<std::string> flat_model_shards(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.rfind("model-rank", 0) == 0 && name.size() > 12 &&
        name.compare(name.size() - 12, 12, ".safetensors") == 0)
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

HfDirContents read_hf_dir(const std::string& dir) {
  HfDirContents c;
  c.dir = dir;
  c.config_path = (fs::path(dir) / "config.json").string();
  if (!fs::is_directory(dir)) fail("'", dir, "' is not a directory (expected a Hugging Face model directory)");
  if (!fs::exists(c.config_path)) fail("'", dir, "' is not a Hugging Face model directory: no config.json");
  const std::string single = (fs::path(dir) / "model.safetensors").string();
  const std::string index = (fs::path(dir) / "model.safetensors.index.json").string();
  if (fs::exists(single)) {
    c.weight_files = {single};
  } else if (fs::exists(index)) {
    c.index_path = index;
    json j;
    try {
      j = json::parse(read_file(index));
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail(index, ": not valid JSON: ", e.what());
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      fail(index, ": no \"weight_map\" object (tensor name → shard file)");
    std::set<std::string> seen;
    for (auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string()) fail(index, ": weight_map entry '", name, "' is not a file name");
      // A shard is a plain file beside the index: no path into other directories (a downloaded
      // index naming /dev/... or ../.. is refused), no FIFO or device that could block or be huge.
      const std::string shard = file.get<std::string>();
      if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos ||
          shard.find('\0') != std::string::npos)
        fail(index, ": weight_map entry '", name, "' names '", shard, "', not a file name in the directory");
      const std::string path = (fs::path(dir) / shard).string();
      if (!seen.count(path)) {
        if (!fs::exists(path))
          fail("'", dir, "': shard '", shard, "' named by model.safetensors.index.json (for tensor '",
               name, "') is missing");
        if (!fs::is_regular_file(path)) fail(index, ": shard '", shard, "' is not a regular file");
        seen.insert(path);
        c.weight_files.push_back(path);
      }
      c.weight_map[name] = path;
    }
    if (c.weight_files.empty()) fail(index, ": weight_map is empty");
  } else if (const std::vector<std::string> flat = flat_model_shards(dir); !flat.empty()) {
    c.flat_shard_files = flat;
  } else if (fs::exists(fs::path(dir) / "pytorch_model.bin") ||
             fs::exists(fs::path(dir) / "pytorch_model.bin.index.json")) {
    fail("'", dir, "' holds only pytorch_model.bin (a Python pickle), which biofm does not read; convert it with "
         "transformers: AutoModel.from_pretrained(dir).save_pretrained(out_dir) writes model.safetensors");
  } else {
    fail("'", dir, "': no model.safetensors or model.safetensors.index.json");
  }
  c.config_json = read_file(c.config_path);
  return c;
}

std::vector<size_t> load_hf_weights(ParamStore& store, const HfDirContents& hf, const HfNaming& naming,
                                    std::vector<SafetensorsSource>* kept) {
  std::vector<std::unique_ptr<MappedSafetensors>> files;
  if (!hf.flat_shard_files.empty()) {  // biofm's own layout: no names to map
    store.load_flat_shard_files(hf.flat_shard_files);
    return {};
  }
  for (const std::string& p : hf.weight_files) files.push_back(std::make_unique<MappedSafetensors>(p));
  for (auto& [name, path] : hf.weight_map) {
    size_t i = 0;
    while (hf.weight_files[i] != path) ++i;
    if (!files[i]->find(name))
      fail(path, ": has no tensor '", name, "' although ", hf.index_path, " places it there");
  }

  const std::string& prefix = naming.prefix;
  std::set<std::string> params;
  for (const ParamSpec& s : store.specs()) params.insert(s.name);
  auto to_param = [&](const std::string& n) -> std::string {  // "" when no parameter matches
    for (const std::string& cand : {n, legacy_rename(n)}) {
      std::string full = prefix.empty() || starts_with(cand, prefix) || starts_with(cand, "lm_head.") ? cand : prefix + cand;
      if (params.count(full)) return full;
    }
    return "";
  };

  std::vector<ParamStore::Source> sources(store.size());
  std::map<std::string, int> ignored;  // kind → count
  std::vector<std::string> ignored_other;
  bool prefixed = prefix.empty();
  for (auto& f : files) {
    for (const SafetensorsEntry& e : f->entries()) {
      if (!prefix.empty() && starts_with(e.name, prefix)) prefixed = true;
      const std::string pname = to_param(e.name);
      if (pname.empty()) {
        const std::string full = prefix.empty() || starts_with(e.name, prefix) || starts_with(e.name, "lm_head.")
                                     ? e.name
                                     : prefix + e.name;
        std::string kind = builtin_ignored_kind(e.name);
        if (kind.empty() && naming.ignorable && (naming.ignorable(full) || naming.ignorable(legacy_rename(full))))
          kind = "other";
        if (kind.empty()) fail(f->path(), ": unexpected tensor '", e.name, "' (not a parameter of this model)");
        if (kind == "contact-head" && kept) {
          Tensor t = Tensor::empty(e.shape, DType::F32);
          f->copy_into(e, t);
          kept->push_back({full, t, DType::F32});
          continue;
        }
        ++ignored[kind];
        if (kind == "other") ignored_other.push_back(e.name);
        continue;
      }
      const size_t i = store.index(pname);
      if (sources[i].file)
        fail(f->path(), ": tensor '", e.name, "' and '", sources[i].entry->name, "' (", sources[i].file->path(),
             ") both load parameter '", pname, "'");
      sources[i] = {f.get(), &e};
    }
  }
  // A bare base model (no prefix anywhere) has no LM head: its parameters keep their values.
  std::vector<size_t> absent;
  for (size_t i = 0; i < store.size(); ++i) {
    if (sources[i].file) continue;
    const std::string& n = store.spec(i).name;
    if (!prefixed && starts_with(n, "lm_head.")) {
      absent.push_back(i);
      continue;
    }
    fail("'", hf.dir, "': missing parameter '", n, "' (in none of: ", [&] {
      std::string s;
      for (auto& p : hf.weight_files) s += (s.empty() ? "" : ", ") + fs::path(p).filename().string();
      return s;
    }(), ")");
  }
  store.load_mapped(sources);

  // One note for everything that was not loaded.
  std::ostringstream note;
  if (!ignored.empty()) {
    note << "ignored ";
    bool first = true;
    for (auto& [kind, n] : ignored) {
      if (!first) note << ", ";
      first = false;
      if (kind != "other") {
        note << n << " " << kind << (n == 1 ? " tensor" : " tensors");
        continue;
      }
      // A tied decoder's own copy (the config ties it), which need not equal the embeddings.
      note << n << (n == 1 ? " tensor" : " tensors") << " tied to the word embeddings (";
      for (size_t k = 0; k < ignored_other.size() && k < 3; ++k) note << (k ? ", " : "") << ignored_other[k];
      note << (ignored_other.size() > 3 ? ", ...)" : ")");
    }
  }
  // (the contact head kept for exports is not noted here: it matters where an export is written)
  if (!absent.empty())
    note << (note.str().empty() ? "" : "; ") << "a bare base model (no LM head): " << absent.size()
         << " lm_head.* parameters are initialised as for a new model";
  if (!note.str().empty()) biofm::note(hf.dir + ": " + note.str());
  return absent;
}

void save_hf_weights(const ParamStore& store, const std::string& dir, const std::vector<SafetensorsSource>& extra) {
  std::vector<SafetensorsSource> tensors = store.tensors_for_writing(DType::F32);
  tensors.insert(tensors.end(), extra.begin(), extra.end());
  write_safetensors_stream(dir + "/model.safetensors", tensors, {{"format", "pt"}});
}

}  // namespace biofm
