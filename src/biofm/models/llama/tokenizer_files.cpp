#include "biofm/models/llama/tokenizer_files.h"

#include <nlohmann/json.hpp>

#include "biofm/data/tokenizer.h"
#include "biofm/io/atomic_file.h"

namespace biofm {

namespace {

using ojson = nlohmann::ordered_json;

// Byte value b as the one-character string `tokenizers` sees: code point b in UTF-8 (so
// bytes 128..255 are the Latin-1 characters, as with Python's chr(b)).
std::string char_of_byte(int b) {
  std::string s;
  if (b < 0x80) {
    s.push_back(char(b));
  } else {
    s.push_back(char(0xC0 | (b >> 6)));
    s.push_back(char(0x80 | (b & 0x3F)));
  }
  return s;
}

const char* const kSpecial[4] = {"<EOS>", "<PAD>", "<BOS>", "<UNK>"};  // ids 0..3

}  // namespace

std::string nucleotide_tokenizer_json() {
  static_assert(NucleotideTokenizer::kEos == 0 && NucleotideTokenizer::kPad == 1 &&
                NucleotideTokenizer::kBos == 2 && NucleotideTokenizer::kUnk == 3);
  ojson added = ojson::array();
  ojson vocab = ojson::object();
  for (int i = 0; i < 4; ++i) {
    added.push_back({{"id", i}, {"content", kSpecial[i]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
    vocab[kSpecial[i]] = i;
  }
  for (int b = 4; b < NucleotideTokenizer::kVocabSize; ++b) vocab[char_of_byte(b)] = b;
  auto special = [](const char* t) { return ojson{{"SpecialToken", {{"id", t}, {"type_id", 0}}}}; };
  auto seq = [](const char* id, int type) { return ojson{{"Sequence", {{"id", id}, {"type_id", type}}}}; };
  ojson special_pair1 = {{"SpecialToken", {{"id", "<EOS>"}, {"type_id", 1}}}};
  ojson j = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      // One token per character; (?m) makes '.' match newlines too (Oniguruma syntax).
      {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(?m)."}}}, {"behavior", "Isolated"}, {"invert", false}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {special("<BOS>"), seq("A", 0), special("<EOS>")}},
        {"pair", {special("<BOS>"), seq("A", 0), special("<EOS>"), seq("B", 1), special_pair1}},
        {"special_tokens",
         {{"<BOS>", {{"id", "<BOS>"}, {"ids", {NucleotideTokenizer::kBos}}, {"tokens", {"<BOS>"}}}},
          {"<EOS>", {{"id", "<EOS>"}, {"ids", {NucleotideTokenizer::kEos}}, {"tokens", {"<EOS>"}}}}}}}},
      {"decoder", {{"type", "Fuse"}}},
      {"model", {{"type", "WordLevel"}, {"vocab", vocab}, {"unk_token", "<UNK>"}}},
  };
  return j.dump(1) + "\n";
}

void write_nucleotide_tokenizer_files(const std::string& dir, int model_max_length) {
  ojson special = {{"bos_token", "<BOS>"}, {"eos_token", "<EOS>"}, {"pad_token", "<PAD>"}, {"unk_token", "<UNK>"}};
  ojson config = special;
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  config["model_max_length"] = model_max_length;
  config["padding_side"] = "right";
  config["clean_up_tokenization_spaces"] = false;
  write_file_atomic(dir + "/tokenizer.json", nucleotide_tokenizer_json());
  write_file_atomic(dir + "/tokenizer_config.json", config.dump(2) + "\n");
  write_file_atomic(dir + "/special_tokens_map.json", special.dump(2) + "\n");
}

}  // namespace biofm
