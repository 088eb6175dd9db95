// Scores from a model's own probabilities, no training:
//  - ESM-2 pseudo-log-likelihood (Salazar et al. 2020; as used for protein LMs): Σ_i log p(x_i |
//    x with position i masked), one masked copy of the sequence per position, batched;
//  - masked-marginal variant-effect scores (Meier et al. 2021, fair-esm's
//    predict.py --scoring-strategy masked-marginals, as ProteinGym runs it): for a mutation set
//    {wt_k pos_k mt_k}, Σ_k log p(mt_k | pos_k masked) − log p(wt_k | pos_k masked), every
//    position masked alone in the wild type;
//  - causal LM log-likelihoods per base (Llama DNA models): log p(base_t | bases before t) over
//    windows overlapping by `stride` bases, each base scored once, in the first window that
//    predicts it (as biofm eval), A/C/G/T only (either case).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "biofm/data/dataset.h"
#include "biofm/data/tokenizer.h"
#include "biofm/infer/progress.h"
#include "biofm/models/language_model.h"

namespace biofm::infer {

struct Mutation {
  char wt = 0, mt = 0;
  int64_t pos = 0;  // 1-based
};
struct MutationSet {
  std::string text;  // as written ("A123G:L45P")
  std::vector<Mutation> muts;
};
// The 20 standard amino acids (ACDEFGHIKLMNPQRSTVWY), either case: what a variant's wild-type
// and mutant residues may be. ESM-2's vocabulary also holds X, B, U, Z, O, '.' and '-', but
// ProteinGym's substitutions use the 20 only, and a gap or an ambiguity code is no substitution.
bool standard_amino_acid(char c);

// "A123G" or "A123G:L45P" against the wild type: positions 1-based and inside it, the
// wild-type residue equal to the sequence's there, both residues standard amino acids (either
// case; stored uppercase) in the tokenizer's alphabet. Errors start with `where` (e.g. "muts.txt:12").
MutationSet parse_mutation_set(std::string_view text, std::string_view wild_type, const Tokenizer& tok,
                               const std::string& where);
// One mutation set per line; blank lines and lines starting with '#' are skipped. A first line
// with a comma or tab, or that is just `mutant`, is a header (CSV/TSV, e.g. ProteinGym's): its
// 'mutant' column is read. No mutation at all is an error ("no mutations").
std::vector<MutationSet> read_mutations(const std::string& path, std::string_view wild_type, const Tokenizer& tok);

struct MaskedLmOptions {
  int64_t max_seq_length = 1024;  // tokens per sequence, specials included; longer ones truncated
  int64_t max_tokens = 8192;      // tokens per batch
};

struct PllResult {
  double pll = 0;         // Σ_i log p(x_i | masked i), natural log
  int64_t positions = 0;  // residues scored (those kept after truncation, <unk> ones excluded)
  int64_t unknown = 0;    // residues kept after truncation that are <unk>: context, not scored
  bool truncated = false;
};
// Records [first, first + n): one masked copy per residue (the tokenizer's mask id). A residue
// outside the alphabet (<unk>) stays in every copy as context but is not masked or scored:
// log p(<unk>) says nothing about the protein, and eval never masks <unk> either.
std::vector<PllResult> pseudo_log_likelihoods(LanguageModel& model, const Tokenizer& tok, const SequenceDataset& data,
                                              uint64_t first, uint64_t n, const MaskedLmOptions& o,
                                              Progress* progress = nullptr);

// log_softmax over the vocabulary at each 1-based position of `positions`, with that position
// masked in `seq` (one pass per position, batched): position -> log p [vocab].
std::map<int64_t, std::vector<double>> masked_log_probs(LanguageModel& model, const Tokenizer& tok,
                                                        std::string_view seq, const std::vector<int64_t>& positions,
                                                        int64_t max_tokens);
double masked_marginal_score(const MutationSet& m, const std::map<int64_t, std::vector<double>>& log_probs,
                             const Tokenizer& tok);

struct CausalOptions {
  int64_t window_tokens = 8192;  // tokens per window, <BOS> and <EOS> included
  int64_t stride = 200;          // bases shared by consecutive windows
  int64_t max_tokens = 8192;
  bool per_base = false;  // keep each base's log-likelihood
  bool uppercase_labels = false;  // a/c/g/t targets scored as A/C/G/T (as dataset.uppercase_labels)
};
struct CausalResult {
  double nll = 0;           // Σ −log p over scored bases
  int64_t scored = 0;       // bases scored (A/C/G/T)
  std::vector<float> base_ll;  // per base: log p(base | before), NaN where not scored (per_base)
};
std::vector<CausalResult> causal_log_likelihoods(LanguageModel& model, const Tokenizer& tok,
                                                 const SequenceDataset& data, uint64_t first, uint64_t n,
                                                 const CausalOptions& o, Progress* progress = nullptr);

}  // namespace biofm::infer
