// Characters outside a tokenizer's alphabet, counted record by record with the first few seen:
// what the inference commands warn about (infer/alphabet.h), and what training's data loading
// (train/setup.cpp, data/stream.h) and `biofm prepare` note.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "biofm/data/tokenizer.h"

namespace biofm {

struct ResidueTally {
  static constexpr size_t kExamples = 5;
  std::array<bool, 256> counted{};  // the characters counted
  std::string what;  // what they are ("not in the model's alphabet and read as <unk>")
  std::string then;  // what becomes of them ("" when the caller says it)
  uint64_t residues = 0, records = 0;  // the characters counted, and the records holding one
  std::string examples;                // the first distinct ones seen, at most kExamples

  void add(std::string_view sequence);    // counts one record
  void merge(const ResidueTally& other);  // adds another part's counts (the same characters)
  // "" when nothing was counted; else "N residues in M records are <what> (seen: 'J', '*')",
  // then ": <then>" unless `then` is empty (singular forms for 1).
  std::string text(std::string_view then) const;
  std::string text() const { return text(then); }
};

// The characters `tok` reads as <unk>.
ResidueTally unknown_residues(const Tokenizer& tok);

// What a model trained with `tok` learns nothing about. ESM-2: the characters read as <unk>
// (context only, never a masked-LM target). The nucleotide tokenizer gives every byte a token of
// its own, so there: anything but A/C/G/T/N in either case (soft-masked lowercase is DNA too),
// which genomic masking never makes a target.
ResidueTally training_alphabet(const Tokenizer& tok);

}  // namespace biofm
