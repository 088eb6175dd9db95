// The tokenizer files Hugging Face's AutoTokenizer reads for ESM-2.
#pragma once
#include <string>

namespace biofm {
// Writes vocab.txt, tokenizer_config.json and special_tokens_map.json into dir.
void write_esm2_tokenizer_files(const std::string& dir, int model_max_length);
}  // namespace biofm
