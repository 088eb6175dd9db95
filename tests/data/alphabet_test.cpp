// data/alphabet.h: the characters outside a tokenizer's alphabet, counted per record with the
// first few seen, as training, prepare and the inference commands report them.
#include "biofm/data/alphabet.h"

#include <gtest/gtest.h>

using namespace biofm;

TEST(DataAlphabet, ProteinTrainingCountsWhatReadsAsUnk) {
  ResidueTally t = training_alphabet(esm_tokenizer());
  t.add("MKVXBUZO.-mkv");  // all in ESM-2's vocabulary (lowercase is read as uppercase)
  EXPECT_EQ(t.text(), "");
  t.add("MKJ1V*J");
  t.add("ACDE");
  t.add(std::string("M\x01K\xE9", 4));
  EXPECT_EQ(t.residues, 6u);
  EXPECT_EQ(t.records, 2u);
  EXPECT_EQ(t.text(),
            "6 residues in 2 records are not in the protein alphabet and read as <unk> (seen: 'J', '1', '*', '\\x01', "
            "'\\xe9'): context only, never a masked-LM target");
  t.add("Q@");  // a sixth distinct character: counted, not listed
  EXPECT_EQ(t.examples.size(), ResidueTally::kExamples);
  EXPECT_EQ(t.residues, 7u);
  ResidueTally one = training_alphabet(esm_tokenizer());
  one.add("MK*");
  EXPECT_EQ(one.text("x"), "1 residue in 1 record is not in the protein alphabet and read as <unk> (seen: '*'): x");
}

TEST(DataAlphabet, DnaTrainingCountsAllButAcgtnInEitherCase) {
  ResidueTally t = training_alphabet(nucleotide_tokenizer());
  t.add("ACGTNacgtnNNNNacgtACGT");  // soft-masked (lowercase) DNA and N: nothing to say
  EXPECT_EQ(t.text(), "");
  t.add("ACRYGTUu");
  EXPECT_EQ(t.text(), "4 residues in 1 record are not A/C/G/T/N (either case) (seen: 'R', 'Y', 'U', 'u'): tokens of "
                      "their own, read as context, never a target");
}

TEST(DataAlphabet, PartsMergeTheirCountsAndExamples) {
  ResidueTally a = training_alphabet(esm_tokenizer()), b = a;
  a.add("MJ1");
  b.add("M1*2");
  b.add("M3");
  a.merge(b);
  EXPECT_EQ(a.residues, 6u);
  EXPECT_EQ(a.records, 3u);
  EXPECT_EQ(a.examples, "J1*23");
}
