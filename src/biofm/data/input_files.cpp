#include "biofm/data/input_files.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>

#include "biofm/core/error.h"
#include "biofm/data/reader.h"

namespace biofm {

namespace fs = std::filesystem;

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

void add_directory(const std::string& dir, InputFiles& out) {
  std::vector<std::string> found;
  uint64_t skipped = 0, shards = 0;  // (shards: biofm prepare's, for the message)
  std::string subfolder;  // one, to name in the message below
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    std::error_code ec2;
    if (!name.empty() && name[0] != '.' && e.is_directory(ec2) && subfolder.empty()) subfolder = name;
    if (name.empty() || name[0] == '.' || !e.is_regular_file(ec2)) continue;
    // A Hugging Face dataset folder's metadata (datasets' save_to_disk, hub repositories): not data.
    const bool hf_metadata = name == "dataset_info.json" || name == "state.json" || name == "dataset_dict.json";
    if (format_from_extension(name) && !hf_metadata) {
      found.push_back(e.path().string());
    } else {
      ++skipped;
      shards += name.size() > 6 && name.compare(name.size() - 6, 6, ".shard") == 0;
    }
  }
  if (ec) fail("cannot list directory ", dir, ": ", ec.message());
  if (found.empty() && shards > 0)
    fail("directory ", dir, " holds ", shards, " shard(s) of biofm prepare but no manifest.json: that prepare did not "
         "finish (or the manifest was removed); run biofm prepare again");
  if (found.empty())
    fail("directory ", dir, " holds no sequence files (", skipped,
         " other file(s) skipped; recognised: .fasta .fa .faa .fna .fas .ffn .csv .tsv .tab .jsonl .json .txt, "
         "optionally .gz or .zst, and .parquet); ",
         subfolder.empty() ? "name other files with a glob such as " + (fs::path(dir) / "*.seq").string()
                           : "subfolders are not searched: name them, e.g. " + (fs::path(dir) / subfolder / "*").string());
  std::sort(found.begin(), found.end());  // by name: every entry shares the directory prefix
  out.files.insert(out.files.end(), found.begin(), found.end());
  out.skipped += skipped;
}

bool is_pattern(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

void add_entry(const std::string& entry, InputFiles& out, bool allow_glob) {
  std::error_code ec;
  if (fs::is_directory(entry, ec)) return add_directory(entry, out);
  if (!allow_glob || fs::exists(entry, ec) || !is_pattern(entry)) {
    out.files.push_back(entry);
    return;
  }
  glob_t g{};
  const int rc = glob(entry.c_str(), 0, nullptr, &g);  // sorted (no GLOB_NOSORT)
  std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
  globfree(&g);
  if (rc == GLOB_NOMATCH) fail("no files match '", entry, "'");
  if (rc != 0) fail("cannot expand '", entry, "': ", rc == GLOB_NOSPACE ? "out of memory" : "read error");
  for (const auto& m : matches) add_entry(m, out, /*allow_glob=*/false);
}

}  // namespace

std::vector<std::string> split_input_list(const std::string& spec) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = spec.find(',', start);
    std::string e = trim(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!e.empty()) out.push_back(std::move(e));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

InputFiles expand_inputs(const std::string& spec) {
  const std::vector<std::string> entries = split_input_list(spec);
  if (entries.empty()) fail("no input given (expected a file, a directory, a glob or a comma-separated list)");
  InputFiles out;
  for (const auto& e : entries) add_entry(e, out, /*allow_glob=*/true);
  return out;
}

}  // namespace biofm
