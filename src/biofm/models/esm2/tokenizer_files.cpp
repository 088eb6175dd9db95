#include "biofm/models/esm2/tokenizer_files.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <vector>

#include "biofm/core/error.h"
#include "biofm/data/tokenizer.h"
#include "biofm/io/atomic_file.h"

namespace biofm {

void write_esm2_tokenizer_files(const std::string& dir, int model_max_length) {
  using json = nlohmann::json;
  json special = {{"cls_token", "<cls>"}, {"eos_token", "<eos>"}, {"mask_token", "<mask>"},
                  {"pad_token", "<pad>"}, {"unk_token", "<unk>"}};
  json config = special;
  config["tokenizer_class"] = "EsmTokenizer";
  config["model_max_length"] = model_max_length;
  config["clean_up_tokenization_spaces"] = true;
  write_file_atomic(dir + "/vocab.txt", EsmTokenizer::vocab_txt());
  write_file_atomic(dir + "/tokenizer_config.json", config.dump(2) + "\n");
  write_file_atomic(dir + "/special_tokens_map.json", special.dump(2) + "\n");
}

void check_esm2_vocab_file(const std::string& dir) {
  const std::string path = dir + "/vocab.txt";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  std::vector<std::string> theirs;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);) theirs.push_back(line.ends_with('\r') ? line.substr(0, line.size() - 1) : line);
  while (!theirs.empty() && theirs.back().empty()) theirs.pop_back();
  const std::vector<std::string>& ours = EsmTokenizer::vocab();
  for (size_t i = 0; i < std::max(theirs.size(), ours.size()); ++i) {
    const std::string a = i < theirs.size() ? "'" + theirs[i] + "'" : "missing (the file ends)";
    const std::string b = i < ours.size() ? "'" + ours[i] + "'" : "absent (it has " + std::to_string(ours.size()) + " tokens)";
    if (a != b)
      fail(path, ": line ", i + 1, " is ", a, ", the ESM-2 vocabulary's is ", b,
           ": biofm's ESM-2 tokenizer is built in, and this vocabulary would give other token ids");
  }
}

}  // namespace biofm
