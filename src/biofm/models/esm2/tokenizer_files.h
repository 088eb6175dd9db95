// The tokenizer files Hugging Face's AutoTokenizer reads for ESM-2.
#pragma once
#include <string>

namespace biofm {
// Writes vocab.txt, tokenizer_config.json and special_tokens_map.json into dir.
void write_esm2_tokenizer_files(const std::string& dir, int model_max_length);
// The ESM-2 tokenizer is built in: a dir/vocab.txt that differs from its vocabulary (a line
// other than the built-in one, or another number of lines; a missing final newline or a CR
// before each newline, and empty lines at the end, aside) throws, naming the file and the first line that differs. A
// directory without vocab.txt is accepted.
void check_esm2_vocab_file(const std::string& dir);
}  // namespace biofm
