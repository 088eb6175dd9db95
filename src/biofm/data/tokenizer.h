// Tokenizers: ESM-2 (33 ids, Hugging Face EsmTokenizer order) and the byte-level nucleotide
// tokenizer of the Llama-3 genomic recipes. Both map one character to one token.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace biofm {

// ESM-2: 0 <cls>, 1 <pad>, 2 <eos>, 3 <unk>, 4 L, 5 A, 6 G, 7 V, 8 S, 9 E, 10 R, 11 T, 12 I,
// 13 D, 14 P, 15 K, 16 Q, 17 N, 18 F, 19 Y, 20 M, 21 H, 22 W, 23 C, 24 X, 25 B, 26 U, 27 Z,
// 28 O, 29 '.', 30 '-', 31 <null_1>, 32 <mask>. Template: <cls> SEQ <eos>.
// Lowercase residues are accepted (mapped like uppercase; Hugging Face would give <unk>);
// any other character becomes <unk> and is counted.
class EsmTokenizer {
 public:
  static constexpr int32_t kCls = 0, kPad = 1, kEos = 2, kUnk = 3, kNull1 = 31, kMask = 32;
  static constexpr int32_t kVocabSize = 33;

  EsmTokenizer();
  int32_t vocab_size() const { return kVocabSize; }
  int32_t pad_id() const { return kPad; }
  int32_t mask_id() const { return kMask; }

  // Id of one residue character (kUnk if not in the vocabulary).
  int32_t token_id(char c) const { return table_[static_cast<unsigned char>(c)]; }
  // Appends the residue ids of `seq` (no special tokens); returns how many were <unk>.
  uint64_t encode_residues(std::string_view seq, std::vector<int32_t>& out) const;
  // <cls> SEQ <eos>.
  std::vector<int32_t> encode(std::string_view seq) const;
  // Ids back to text: residues as characters, special tokens as "<cls>" etc.
  std::string decode(const std::vector<int32_t>& ids) const;

  // Special in the Hugging Face sense (never selected for MLM): <cls> <pad> <eos> <unk> <mask>.
  static bool is_special(int32_t id) { return id <= kUnk || id == kMask; }
  // Token strings in id order (what vocab.txt holds, one per line).
  static const std::vector<std::string>& vocab();
  // The text of vocab.txt: every token of vocab() followed by '\n'.
  static std::string vocab_txt();

 private:
  std::array<int32_t, 256> table_;
};

// Nucleotides: id = byte value, except 0 <EOS>, 1 <PAD>, 2 <BOS>, 3 <UNK> (so A=65, C=67,
// G=71, T=84, N=78, a=97, ...). Bytes 0..3 in the input become <UNK> and are counted.
// Template: <BOS> SEQ <EOS>; vocab 256.
class NucleotideTokenizer {
 public:
  static constexpr int32_t kEos = 0, kPad = 1, kBos = 2, kUnk = 3;
  static constexpr int32_t kVocabSize = 256;

  int32_t vocab_size() const { return kVocabSize; }
  int32_t pad_id() const { return kPad; }
  static int32_t token_id(char c) {
    int32_t b = static_cast<unsigned char>(c);
    return b <= kUnk ? kUnk : b;
  }
  uint64_t encode_residues(std::string_view seq, std::vector<int32_t>& out) const;
  std::vector<int32_t> encode(std::string_view seq) const;  // <BOS> SEQ <EOS>
  std::string decode(const std::vector<int32_t>& ids) const;
  // A, C, G, T in either case: the only tokens that carry a label under genomic masking.
  static bool is_acgt(int32_t id) {
    switch (id) {
      case 'A': case 'C': case 'G': case 'T': case 'a': case 'c': case 'g': case 't': return true;
      default: return false;
    }
  }
};

}  // namespace biofm
