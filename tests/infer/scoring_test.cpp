// infer/scoring: pseudo-log-likelihoods, masked marginals and causal per-base log-likelihoods
// against the CPU fp32 model's logits computed by hand here (one sequence, one masked copy at a
// time, log-softmax in double); mutation parsing and its errors.
#include "biofm/infer/scoring.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "biofm/data/causal.h"
#include "biofm/data/pack.h"
#include "biofm/infer/alphabet.h"
#include "biofm/models/registry.h"
#include "infer_test_util.h"

using namespace biofm;
using namespace biofm::infer;

namespace {

using test::fixture;
using test::one_batch;

// log_softmax(logits[row])[v] in double.
double log_prob(const Tensor& logits, int64_t row, int64_t v) {
  const int64_t V = logits.size(1);
  const float* x = logits.f32() + row * V;
  double mx = x[0], s = 0;
  for (int64_t i = 1; i < V; ++i) mx = std::max(mx, double(x[i]));
  for (int64_t i = 0; i < V; ++i) s += std::exp(double(x[i]) - mx);
  return double(x[v]) - mx - std::log(s);
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string p = (std::filesystem::path(testing::TempDir()) / name).string();
  std::ofstream(p) << text;
  return p;
}

}  // namespace

TEST(InferScoring, PseudoLogLikelihoodMatchesMaskingByHand) {
  auto model = load_model_dir(fixture("esm2_tiny"), Device::CPU);
  const Tokenizer& tok = family_of_dir(fixture("esm2_tiny")).tokenizer();
  SequenceDataset data;
  data.add("MKTAYIAKQR", "a");
  data.add("GW", "b");
  data.add("LLSPADKTNVKAAW", "c");
  MaskedLmOptions o;
  o.max_tokens = 30;  // several batches
  const std::vector<PllResult> got = pseudo_log_likelihoods(*model, tok, data, 0, 3, o);
  ASSERT_EQ(got.size(), 3u);
  for (uint64_t r = 0; r < 3; ++r) {
    const std::vector<int32_t> ids = tok.encode(data.sequence(r));
    double pll = 0;
    for (size_t i = 1; i + 1 < ids.size(); ++i) {
      std::vector<int32_t> masked = ids;
      masked[i] = tok.mask_id();
      pll += log_prob(model->logits(one_batch(masked)), int64_t(i), ids[i]);
    }
    EXPECT_NEAR(got[r].pll, pll, 1e-4 * std::max(1.0, std::fabs(pll))) << r;
    EXPECT_EQ(got[r].positions, int64_t(ids.size()) - 2);
    EXPECT_FALSE(got[r].truncated);
  }
  o.max_seq_length = 6;  // 4 residues
  const std::vector<PllResult> cut = pseudo_log_likelihoods(*model, tok, data, 0, 1, o);
  EXPECT_TRUE(cut[0].truncated);
  EXPECT_EQ(cut[0].positions, 4);
}

// A residue outside the alphabet ('*', '#': <unk>) stays in every masked copy as context, but is not
// masked or scored itself: log p(<unk>) would say nothing about the protein.
TEST(InferScoring, PseudoLogLikelihoodLeavesUnknownResiduesOut) {
  auto model = load_model_dir(fixture("esm2_tiny"), Device::CPU);
  const Tokenizer& tok = family_of_dir(fixture("esm2_tiny")).tokenizer();
  SequenceDataset data;
  data.add("MK*TAYI#KQ", "two_unknown");
  data.add("**", "only_unknown");
  data.add("GW", "plain");
  const std::vector<PllResult> got = pseudo_log_likelihoods(*model, tok, data, 0, 3, MaskedLmOptions{});
  ASSERT_EQ(got.size(), 3u);
  const std::vector<int32_t> ids = tok.encode(data.sequence(0));
  double pll = 0;
  for (size_t i = 1; i + 1 < ids.size(); ++i) {
    if (ids[i] == tok.unk_id()) continue;
    std::vector<int32_t> masked = ids;  // the <unk> residues stay in as context
    masked[i] = tok.mask_id();
    pll += log_prob(model->logits(one_batch(masked)), int64_t(i), ids[i]);
  }
  EXPECT_NEAR(got[0].pll, pll, 1e-4 * std::max(1.0, std::fabs(pll)));
  EXPECT_EQ(got[0].positions, 8);
  EXPECT_EQ(got[0].unknown, 2);
  EXPECT_EQ(got[1].positions, 0);
  EXPECT_EQ(got[1].unknown, 2);
  EXPECT_EQ(got[1].pll, 0.0);
  EXPECT_EQ(got[2].positions, 2);
  EXPECT_EQ(got[2].unknown, 0);
}

TEST(InferScoring, UnknownResiduesAndEmptyRecordsAreWarnedAbout) {
  const Tokenizer& tok = family_of_dir(fixture("esm2_tiny")).tokenizer();
  AlphabetReport u = alphabet_report(tok);
  EXPECT_EQ(u.unknown_warning("x"), "");
  u.add("MKVXBUZO.-mkv");  // all in ESM-2's vocabulary (lowercase is read as uppercase)
  EXPECT_EQ(u.unknown.residues, 0u);
  u.add("MK*TA");
  u.add("M1K2");
  EXPECT_EQ(u.unknown.residues, 3u);
  EXPECT_EQ(u.unknown.records, 2u);
  EXPECT_EQ(u.unknown_warning("context only"),
            "warning: 3 residues in 2 records are not in the model's alphabet and read as <unk> (seen: '*', '1', "
            "'2'): context only");
  EXPECT_EQ(empty_records_warning(0, "x"), "");
  EXPECT_NE(empty_records_warning(2, "no row").find("warning: 2 empty records"), std::string::npos);
}

TEST(InferScoring, MaskedMarginalsMatchMaskingByHand) {
  auto model = load_model_dir(fixture("esm2_tiny"), Device::CPU);
  const Tokenizer& tok = family_of_dir(fixture("esm2_tiny")).tokenizer();
  const std::string wt = "MKTAYIAKQRQISFVKSHFS";
  const MutationSet single = parse_mutation_set("K2A", wt, tok, "x");
  const MutationSet multi = parse_mutation_set("M1L:Y5W:S20P", wt, tok, "x");
  const auto lp = masked_log_probs(*model, tok, wt, {1, 2, 5, 20}, 50);
  const std::vector<int32_t> ids = tok.encode(wt);
  auto by_hand = [&](const MutationSet& m) {
    double s = 0;
    for (const Mutation& mu : m.muts) {
      std::vector<int32_t> masked = ids;
      masked[size_t(mu.pos)] = tok.mask_id();
      const Tensor lg = model->logits(one_batch(masked));
      s += log_prob(lg, mu.pos, tok.encode(std::string(1, mu.mt))[1]) -
           log_prob(lg, mu.pos, tok.encode(std::string(1, mu.wt))[1]);
    }
    return s;
  };
  EXPECT_NEAR(masked_marginal_score(single, lp, tok), by_hand(single), 1e-5);
  EXPECT_NEAR(masked_marginal_score(multi, lp, tok), by_hand(multi), 1e-5);
  EXPECT_EQ(masked_marginal_score(parse_mutation_set("K2K", wt, tok, "x"), lp, tok), 0.0);
}

TEST(InferScoring, MutationErrorsNameTheLine) {
  const Tokenizer& tok = family_of_dir(fixture("esm2_tiny")).tokenizer();
  const std::string wt = "MKTAYIAKQR";
  auto error_of_wt = [&](const std::string& text, const std::string& wild_type) {
    try {
      read_mutations(write_temp("muts.txt", text), wild_type, tok);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto error_of = [&](const std::string& text) { return error_of_wt(text, wt); };
  EXPECT_NE(error_of("K2A\n\n# comment\nA3G\n").find("muts.txt:4"), std::string::npos) << "wild type T at 3, not A";
  EXPECT_NE(error_of("K2A\nK2A:M11L\n").find("muts.txt:2"), std::string::npos) << "position 11 outside";
  // Both residues among the 20 standard amino acids: no gap, stop, ambiguity code or rare residue,
  // though ESM-2's vocabulary holds '-', '.', X, B, U, Z and O.
  for (const char* bad : {"K2*", "K2-", "K2.", "K2X", "K2B", "K2U", "K2Z", "K2O", "K2<", "K21"}) {
    const std::string e = error_of(std::string(bad) + "\n");
    EXPECT_NE(e.find("muts.txt:1: '" + std::string(bad) + "': the mutant residue"), std::string::npos) << e;
    EXPECT_NE(e.find("20 standard amino acids (ACDEFGHIKLMNPQRSTVWY)"), std::string::npos) << e;
  }
  EXPECT_NE(error_of("X2A\n").find("the wild-type residue 'X' is not one"), std::string::npos);
  EXPECT_EQ(read_mutations(write_temp("x.txt", "K2A\n"), "MKTAX", tok).size(), 1u) << "an X elsewhere is fine";
  EXPECT_NE(error_of_wt("X2A\n", "MXTAY").find("the wild-type residue 'X'"), std::string::npos);
  const MutationSet lower = parse_mutation_set("k2a", wt, tok, "x");  // either case, stored uppercase
  EXPECT_EQ(lower.muts[0].wt, 'K');
  EXPECT_EQ(lower.muts[0].mt, 'A');
  EXPECT_NE(error_of("2A\n").find("A123G"), std::string::npos);
  EXPECT_NE(error_of("K2A:K2L\n").find("twice"), std::string::npos);
  EXPECT_NE(error_of("").find("no mutations"), std::string::npos);
  // ProteinGym-style table: the 'mutant' column.
  const auto sets = read_mutations(write_temp("pg.csv", "mutant,DMS_score\nK2A,0.5\nM1L:T3S,-1\n"), wt, tok);
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(sets[1].text, "M1L:T3S");
  ASSERT_EQ(sets[1].muts.size(), 2u);
  EXPECT_EQ(sets[1].muts[1].pos, 3);
  EXPECT_EQ(sets[1].muts[1].mt, 'S');
  EXPECT_NE(error_of("variant,score\nK2A,1\n").find("'mutant' column"), std::string::npos);
  // A table of the one column 'mutant' (quoted or not, CRLF or not): its header is not a mutation.
  for (const char* text : {"mutant\nK2A\nM1L:T3S\n", "\"mutant\"\r\n\"K2A\"\r\nM1L:T3S\r\n", "# c\n\nmutant\nK2A\nM1L:T3S\n"}) {
    const auto one = read_mutations(write_temp("one.csv", text), wt, tok);
    ASSERT_EQ(one.size(), 2u) << text;
    EXPECT_EQ(one[0].text, "K2A");
    EXPECT_EQ(one[1].text, "M1L:T3S");
  }
  // A header and no rows: no mutations, not a parse error of the header.
  EXPECT_NE(error_of("mutant\n").find("muts.txt: no mutations (a header and no rows)"), std::string::npos)
      << error_of("mutant\n");
  EXPECT_NE(error_of("mutant,DMS_score\n").find("no mutations"), std::string::npos);
  // Quoted fields (R's write.csv quotes every string; RFC 4180 "" escapes; a comma inside quotes).
  const auto quoted = read_mutations(
      write_temp("q.csv", "\"mutated_sequence\",\"mutant\",\"note\"\n\"MATAY\",\"K2A\",\"a, \"\"b\"\"\"\n"
                          "\"MKSAY\", \"T3S:M1L\" ,1\n"),
      wt, tok);
  ASSERT_EQ(quoted.size(), 2u);
  EXPECT_EQ(quoted[0].text, "K2A");
  EXPECT_EQ(quoted[1].text, "T3S:M1L");
  EXPECT_NE(error_of("mutant,x\n\"K2A,1\n").find("muts.txt:2: unterminated quoted field"), std::string::npos);
  EXPECT_NE(error_of("mutant,x\nK2A,1\"\n").find("muts.txt:2: a '\"' inside unquoted field 2"), std::string::npos)
      << error_of("mutant,x\nK2A,1\"\n");
  // A UTF-8 byte-order mark before the header (Excel's "CSV UTF-8") is not part of its name.
  const auto bom = read_mutations(write_temp("bom.csv", "\xEF\xBB\xBFmutant,DMS_score\r\nK2A,0.5\r\n"), wt, tok);
  ASSERT_EQ(bom.size(), 1u);
  EXPECT_EQ(bom[0].text, "K2A");
}

// Per-base log-likelihoods over overlapping windows: each A/C/G/T base once, from the first
// window that predicts it, equal to log_softmax of that window's logits run alone.
TEST(InferScoring, CausalPerBaseLogLikelihoodsByHand) {
  auto model = load_model_dir(fixture("llama_tiny"), Device::CPU);
  const Tokenizer& tok = family_of_dir(fixture("llama_tiny")).tokenizer();
  SequenceDataset data;
  data.add("ACGTTGCANNACGTAGCTAGGATCCAGTACGATCGAT", "chr1");
  data.add("GATTACA", "chr2");
  CausalOptions o;
  o.window_tokens = 12;  // 10 bases
  o.stride = 3;
  o.max_tokens = 26;
  o.per_base = true;
  const std::vector<CausalResult> got = causal_log_likelihoods(*model, tok, data, 0, 2, o);
  for (uint64_t r = 0; r < 2; ++r) {
    const std::string seq(data.sequence(r));
    std::vector<double> want(seq.size(), NAN);
    uint64_t scored_until = 0;
    for (const Window& w : make_windows(seq.size(), o.window_tokens, o.stride)) {
      std::vector<int32_t> ids{tok.begin_id()};
      tok.encode_residues(seq.substr(w.start, w.length), ids);
      ids.push_back(tok.end_id());
      const Tensor lg = model->logits(one_batch(ids));
      for (uint64_t t = 0; t < w.length; ++t) {
        const uint64_t base = w.start + t;
        if (base < scored_until || !NucleotideTokenizer::is_acgt(ids[t + 1])) continue;
        want[base] = log_prob(lg, int64_t(t), ids[t + 1]);  // row t predicts the token after it
      }
      scored_until = w.start + w.length;
    }
    double nll = 0;
    int64_t scored = 0;
    ASSERT_EQ(got[r].base_ll.size(), seq.size());
    for (size_t i = 0; i < seq.size(); ++i) {
      EXPECT_EQ(std::isnan(want[i]), std::isnan(got[r].base_ll[i])) << "base " << i;
      if (std::isnan(want[i])) continue;
      EXPECT_NEAR(got[r].base_ll[i], want[i], 1e-4) << "base " << i;
      nll -= want[i];
      ++scored;
    }
    EXPECT_EQ(got[r].scored, scored);
    EXPECT_NEAR(got[r].nll, nll, 1e-3);
  }
  EXPECT_TRUE(std::isnan(got[0].base_ll[8])) << "N is not scored";
}
