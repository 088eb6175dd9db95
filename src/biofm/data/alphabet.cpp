#include "biofm/data/alphabet.h"

#include <cstdio>
#include <vector>

namespace biofm {

namespace {

// 'J', or '\x01' for a byte that is not printable ASCII.
std::string quoted(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "'\\x%02x'", u);
  return buf;
}

}  // namespace

void ResidueTally::add(std::string_view sequence) {
  uint64_t n = 0;
  for (char c : sequence) n += counted[static_cast<unsigned char>(c)];
  if (n == 0) return;
  residues += n;
  records += 1;
  for (size_t i = 0; i < sequence.size() && examples.size() < kExamples; ++i)
    if (counted[static_cast<unsigned char>(sequence[i])] && examples.find(sequence[i]) == std::string::npos)
      examples += sequence[i];
}

void ResidueTally::merge(const ResidueTally& other) {
  residues += other.residues;
  records += other.records;
  for (char c : other.examples)
    if (examples.size() < kExamples && examples.find(c) == std::string::npos) examples += c;
}

std::string ResidueTally::text(std::string_view then_text) const {
  if (residues == 0) return "";
  std::string seen;
  for (char c : examples) seen += (seen.empty() ? "" : ", ") + quoted(c);
  std::string s = std::to_string(residues) + (residues == 1 ? " residue in " : " residues in ") +
                  std::to_string(records) + (records == 1 ? " record " : " records ") + (residues == 1 ? "is " : "are ") +
                  what + " (seen: " + seen + ")";
  if (!then_text.empty()) s.append(": ").append(then_text);
  return s;
}

ResidueTally unknown_residues(const Tokenizer& tok) {
  ResidueTally t;
  t.what = "not in the model's alphabet and read as <unk>";
  std::vector<int32_t> ids;
  for (int c = 0; c < 256; ++c) {  // (the tokenizers read residues one character at a time)
    const char ch = char(c);
    ids.clear();
    t.counted[size_t(c)] = tok.encode_residues(std::string_view(&ch, 1), ids) > 0;
  }
  return t;
}

ResidueTally training_alphabet(const Tokenizer& tok) {
  if (dynamic_cast<const NucleotideTokenizer*>(&tok) == nullptr) {
    ResidueTally t = unknown_residues(tok);
    t.what = "not in the protein alphabet and read as <unk>";
    t.then = "context only, never a masked-LM target";
    return t;
  }
  ResidueTally t;
  t.counted.fill(true);
  for (char c : std::string_view("ACGTNacgtn")) t.counted[static_cast<unsigned char>(c)] = false;
  t.what = "not A/C/G/T/N (either case)";
  t.then = "tokens of their own, read as context, never a target";
  return t;
}

}  // namespace biofm
