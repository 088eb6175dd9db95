// The tokenizer files Hugging Face's AutoTokenizer reads for the nucleotide tokenizer
// (id = byte value, 0 <EOS>, 1 <PAD>, 2 <BOS>, 3 <UNK>; template <BOS> SEQ <EOS>).
#pragma once
#include <string>

namespace biofm {
// Writes tokenizer.json (a `tokenizers` WordLevel model over single characters, with a
// <BOS> $A <EOS> post-processor and a Fuse decoder), tokenizer_config.json
// (PreTrainedTokenizerFast) and special_tokens_map.json into dir.
void write_nucleotide_tokenizer_files(const std::string& dir, int model_max_length);
// The tokenizer.json text alone.
std::string nucleotide_tokenizer_json();
}  // namespace biofm
