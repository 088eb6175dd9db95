// Tokenizers behind one interface: ESM-2 (33 ids, Hugging Face EsmTokenizer order) and the
// byte-level nucleotide tokenizer of the Llama-3 genomic recipes. Both map one character to
// one token and wrap a sequence as <begin> SEQ <end>. A model family names its tokenizer in
// the registry (models/registry.h); batchers and commands use only this interface.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace biofm {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual int32_t vocab_size() const = 0;
  virtual int32_t pad_id() const = 0;
  virtual int32_t begin_id() const = 0;  // first token of every sequence (<cls>, <BOS>)
  virtual int32_t end_id() const = 0;    // last token (<eos>, <EOS>)
  virtual int32_t unk_id() const = 0;
  virtual int32_t mask_id() const { return -1; }  // -1: no mask token
  // Never selected as a masked-LM target (Hugging Face's all_special_ids).
  virtual bool is_special(int32_t id) const = 0;
  // Appends the residue ids of `seq` (no special tokens); returns how many were unknown.
  virtual uint64_t encode_residues(std::string_view seq, std::vector<int32_t>& out) const = 0;
  // Ids back to text: residues as characters, special tokens by name.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // <begin> SEQ <end>.
  std::vector<int32_t> encode(std::string_view seq) const;
};

// ESM-2: 0 <cls>, 1 <pad>, 2 <eos>, 3 <unk>, 4 L, 5 A, 6 G, 7 V, 8 S, 9 E, 10 R, 11 T, 12 I,
// 13 D, 14 P, 15 K, 16 Q, 17 N, 18 F, 19 Y, 20 M, 21 H, 22 W, 23 C, 24 X, 25 B, 26 U, 27 Z,
// 28 O, 29 '.', 30 '-', 31 <null_1>, 32 <mask>. Template: <cls> SEQ <eos>.
// Lowercase residues are accepted (mapped like uppercase; Hugging Face would give <unk>);
// any other character becomes <unk> and is counted.
class EsmTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kCls = 0, kPad = 1, kEos = 2, kUnk = 3, kNull1 = 31, kMask = 32;
  static constexpr int32_t kVocabSize = 33;

  EsmTokenizer();
  int32_t vocab_size() const override { return kVocabSize; }
  int32_t pad_id() const override { return kPad; }
  int32_t begin_id() const override { return kCls; }
  int32_t end_id() const override { return kEos; }
  int32_t unk_id() const override { return kUnk; }
  int32_t mask_id() const override { return kMask; }
  bool is_special(int32_t id) const override { return special(id); }

  // Id of one residue character (kUnk if not in the vocabulary).
  int32_t token_id(char c) const { return table_[static_cast<unsigned char>(c)]; }
  uint64_t encode_residues(std::string_view seq, std::vector<int32_t>& out) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;

  // Special in the Hugging Face sense (never selected for MLM): <cls> <pad> <eos> <unk> <mask>.
  static bool special(int32_t id) { return id <= kUnk || id == kMask; }
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
class NucleotideTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kEos = 0, kPad = 1, kBos = 2, kUnk = 3;
  static constexpr int32_t kVocabSize = 256;

  int32_t vocab_size() const override { return kVocabSize; }
  int32_t pad_id() const override { return kPad; }
  int32_t begin_id() const override { return kBos; }
  int32_t end_id() const override { return kEos; }
  int32_t unk_id() const override { return kUnk; }
  bool is_special(int32_t id) const override { return id <= kUnk; }
  static int32_t token_id(char c) {
    int32_t b = static_cast<unsigned char>(c);
    return b <= kUnk ? kUnk : b;
  }
  uint64_t encode_residues(std::string_view seq, std::vector<int32_t>& out) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  // A, C, G, T in either case: the only tokens that carry a label under genomic masking.
  static bool is_acgt(int32_t id) {
    switch (id) {
      case 'A': case 'C': case 'G': case 'T': case 'a': case 'c': case 'g': case 't': return true;
      default: return false;
    }
  }
};

// Shared, immutable instances.
const EsmTokenizer& esm_tokenizer();
const NucleotideTokenizer& nucleotide_tokenizer();

}  // namespace biofm
