// infer/progress and infer/alphabet: the progress line's content, and the input checks'
// thresholds.
#include <gtest/gtest.h>

#include "biofm/infer/alphabet.h"
#include "biofm/infer/progress.h"

using namespace biofm;
using namespace biofm::infer;

TEST(InferProgress, LineSaysCountsRatesAndTimeLeft) {
  Progress p("embed", 100, 10000, /*enabled=*/false);
  p.skip(20, 2000);  // resumed: counted, not timed
  p.add(30, 3000);
  EXPECT_EQ(p.records(), 50);
  EXPECT_EQ(p.tokens(), 5000);
  const std::string line = p.line();
  EXPECT_NE(line.find("embed: 50/100 records (50%)"), std::string::npos) << line;
  EXPECT_NE(line.find("records/s"), std::string::npos) << line;
  EXPECT_NE(line.find("tokens/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA"), std::string::npos) << line;
  p.add(50, 5000);
  EXPECT_NE(p.line().find("done in"), std::string::npos) << p.line();
}

TEST(InferAlphabet, WarnsOnTheWrongKindOfSequence) {
  const SequenceDataset dna = SequenceDataset::from_sequences({"ACGTACGTNNACGT", "acgtttgca"});
  const SequenceDataset protein = SequenceDataset::from_sequences({"MKTAYIAKQRQISFVKSHFSRQ", "GWTLNSAGYLLGPHAV"});
  EXPECT_NE(check_alphabet(esm_tokenizer(), dna).warning().find("looks like DNA"), std::string::npos);
  EXPECT_EQ(check_alphabet(esm_tokenizer(), protein).warning(), "");
  EXPECT_NE(check_alphabet(nucleotide_tokenizer(), protein).warning().find("DNA model"), std::string::npos);
  EXPECT_EQ(check_alphabet(nucleotide_tokenizer(), dna).warning(), "");
  // A few degenerate bases are DNA still.
  EXPECT_EQ(check_alphabet(nucleotide_tokenizer(), SequenceDataset::from_sequences({"ACGTRYKMACGTACGTACGT"})).warning(), "");
  EXPECT_EQ(length_warning("--window", 512, 1024), "");
  EXPECT_NE(length_warning("--window", 8192, 512).find("max_position_embeddings (512)"), std::string::npos);
}
