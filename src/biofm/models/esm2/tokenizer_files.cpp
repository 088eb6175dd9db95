#include "biofm/models/esm2/tokenizer_files.h"

#include <nlohmann/json.hpp>

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

}  // namespace biofm
