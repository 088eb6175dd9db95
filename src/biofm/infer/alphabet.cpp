#include "biofm/infer/alphabet.h"

#include <cstdio>

namespace biofm::infer {

namespace {

bool nucleotide_char(char c) {
  switch (c) {
    case 'A': case 'C': case 'G': case 'T': case 'U': case 'N':
    case 'a': case 'c': case 'g': case 't': case 'u': case 'n': return true;
    default: return false;
  }
}

}  // namespace

AlphabetReport alphabet_report(const Tokenizer& tok) {
  AlphabetReport r;
  r.nucleotide_model = dynamic_cast<const NucleotideTokenizer*>(&tok) != nullptr;
  r.unknown = unknown_residues(tok);
  return r;
}

void AlphabetReport::add(std::string_view sequence) {
  uint64_t u = 0;
  for (char c : sequence) {
    ++characters;
    unusual += nucleotide_char(c) != nucleotide_model;
    lowercase_acgt += c == 'a' || c == 'c' || c == 'g' || c == 't';
    u += c == 'U' || c == 'u';
  }
  unknown.add(sequence);
  rna_u += u;
  rna_u_records += u > 0;
}

AlphabetReport check_alphabet(const Tokenizer& tok, const SequenceDataset& data) {
  AlphabetReport r = alphabet_report(tok);
  for (uint64_t i = 0; i < data.size(); ++i) r.add(data.sequence(i));
  return r;
}

std::string AlphabetReport::warning() const {
  if (characters == 0) return "";
  const double f = double(unusual) / double(characters);
  char buf[256];
  if (nucleotide_model && f > 0.25) {
    std::snprintf(buf, sizeof buf,
                  "warning: %.1f%% of the input characters are not A/C/G/T/U/N: this is a DNA model; "
                  "protein input gives meaningless numbers",
                  100.0 * f);
    return buf;
  }
  // For a protein model `unusual` counts the nucleotide letters.
  if (!nucleotide_model && f > 0.9) {
    std::snprintf(buf, sizeof buf,
                  "warning: %.1f%% of the input characters are A/C/G/T/U/N: this looks like DNA/RNA, "
                  "and this is a protein model; the numbers will be meaningless",
                  100.0 * f);
    return buf;
  }
  return "";
}

std::string AlphabetReport::unknown_warning(const std::string& what_then) const {
  const std::string text = unknown.text(what_then);
  return text.empty() ? "" : "warning: " + text;
}

std::string AlphabetReport::rna_warning() const {
  if (!nucleotide_model || rna_u == 0) return "";
  return "warning: " + std::to_string(rna_u) + (rna_u == 1 ? " U base" : " U bases") + " (RNA) in " +
         std::to_string(rna_u_records) + (rna_u_records == 1 ? " record" : " records") +
         (rna_u == 1 ? " is" : " are") + " context only, not scored (only A/C/G/T are); write U as T to score them";
}

std::string empty_records_warning(uint64_t skipped, const std::string& what_then) {
  if (skipped == 0) return "";
  return "warning: " + std::to_string(skipped) + (skipped == 1 ? " empty record" : " empty records") +
         " (no residues once whitespace and a trailing '*' are dropped) skipped: " + what_then;
}

std::string length_warning(const char* flag, int64_t tokens, int64_t max_positions) {
  if (max_positions <= 0 || tokens <= max_positions) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "warning: %s %lld is longer than the model's max_position_embeddings (%lld): positions past "
                "what it was made for give unreliable numbers",
                flag, (long long)tokens, (long long)max_positions);
  return buf;
}

}  // namespace biofm::infer
