// Input checks that catch a plausible-looking wrong result: a protein model fed DNA, a DNA model
// fed protein, windows longer than the model was made for.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "biofm/data/alphabet.h"
#include "biofm/data/dataset.h"
#include "biofm/data/tokenizer.h"

namespace biofm::infer {

struct AlphabetReport {
  uint64_t characters = 0;  // residues looked at
  // Nucleotide model: characters other than A/C/G/T/U/N; protein model: A/C/G/T/U/N.
  uint64_t unusual = 0;
  bool nucleotide_model = false;
  // Residues the model's tokenizer reads as <unk> (e.g. '*' or a digit in a protein), the records
  // holding at least one, the first few seen (data/alphabet.h).
  ResidueTally unknown;
  uint64_t lowercase_acgt = 0;           // a/c/g/t (soft-masked bases; scored by causal models)
  uint64_t rna_u = 0, rna_u_records = 0;  // U/u: RNA bases, which a DNA model does not score
  // "" when the input looks like what the model reads; else one line saying what is wrong.
  std::string warning() const;
  // "" when no residue was <unk>; else "warning: N residues in M records are not in the model's
  // alphabet and read as <unk> (seen: '*', '1'): " + what_then (what the command did with them).
  std::string unknown_warning(const std::string& what_then) const;
  // Nucleotide model: "" when no U/u was seen; else "warning: N U bases (RNA) in M records are not
  // scored (only A/C/G/T are): ...".
  std::string rna_warning() const;
  // Counts one more sequence (for input read a piece at a time).
  void add(std::string_view sequence);
};

// An empty report for `tok`'s model, to add() sequences to.
AlphabetReport alphabet_report(const Tokenizer& tok);

// Nucleotide models (NucleotideTokenizer): characters other than A/C/G/T/U/N (either case)
// are counted; more than 25% of them suggests protein input. Protein models: A/C/G/T/U/N are
// counted; more than 90% suggests DNA or RNA input (in proteins they make up about a quarter).
AlphabetReport check_alphabet(const Tokenizer& tok, const SequenceDataset& data);

// The warning for records skipped because their sequence was empty (after dropping whitespace and
// a trailing '*'), "" when none: `what_then` says what that means for the output.
std::string empty_records_warning(uint64_t skipped, const std::string& what_then);

// A warning line for a window / sequence length above the model's max_position_embeddings
// ("" when within).
std::string length_warning(const char* flag, int64_t tokens, int64_t max_positions);

}  // namespace biofm::infer
