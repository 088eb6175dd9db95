#include "biofm/data/tokenizer.h"

#include <cctype>

#include "biofm/core/error.h"

namespace biofm {

const std::vector<std::string>& EsmTokenizer::vocab() {
  static const std::vector<std::string> v = {
      "<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R",
      "T",     "I",     "D",     "P",     "K", "Q", "N", "F", "Y", "M", "H",
      "W",     "C",     "X",     "B",     "U", "Z", "O", ".", "-", "<null_1>", "<mask>"};
  return v;
}

std::string EsmTokenizer::vocab_txt() {
  std::string s;
  for (const auto& t : vocab()) s += t + "\n";
  return s;
}

EsmTokenizer::EsmTokenizer() {
  table_.fill(kUnk);
  const auto& v = vocab();
  for (int32_t id = 0; id < kVocabSize; ++id) {
    if (v[id].size() != 1) continue;  // special tokens are never read from text
    unsigned char c = static_cast<unsigned char>(v[id][0]);
    table_[c] = id;
    table_[static_cast<unsigned char>(std::tolower(c))] = id;
  }
}

uint64_t EsmTokenizer::encode_residues(std::string_view seq, std::vector<int32_t>& out) const {
  uint64_t unk = 0;
  for (char c : seq) {
    int32_t id = token_id(c);
    unk += id == kUnk;
    out.push_back(id);
  }
  return unk;
}

std::vector<int32_t> Tokenizer::encode(std::string_view seq) const {
  std::vector<int32_t> out;
  out.reserve(seq.size() + 2);
  out.push_back(begin_id());
  encode_residues(seq, out);
  out.push_back(end_id());
  return out;
}

const EsmTokenizer& esm_tokenizer() {
  static const EsmTokenizer t;
  return t;
}

const NucleotideTokenizer& nucleotide_tokenizer() {
  static const NucleotideTokenizer t;
  return t;
}

std::string EsmTokenizer::decode(const std::vector<int32_t>& ids) const {
  const auto& v = vocab();
  std::string s;
  for (int32_t id : ids) {
    if (id < 0 || id >= kVocabSize) fail("ESM token id ", id, " out of range [0, ", kVocabSize, ")");
    s += v[size_t(id)];
  }
  return s;
}

uint64_t NucleotideTokenizer::encode_residues(std::string_view seq, std::vector<int32_t>& out) const {
  uint64_t unk = 0;
  for (char c : seq) {
    int32_t id = token_id(c);
    unk += id == kUnk;
    out.push_back(id);
  }
  return unk;
}

std::string NucleotideTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string s;
  for (int32_t id : ids) {
    switch (id) {
      case kEos: s += "<EOS>"; break;
      case kPad: s += "<PAD>"; break;
      case kBos: s += "<BOS>"; break;
      case kUnk: s += "<UNK>"; break;
      default:
        if (id < 0 || id >= kVocabSize) fail("nucleotide token id ", id, " out of range [0, 256)");
        s += char(id);
    }
  }
  return s;
}

}  // namespace biofm
