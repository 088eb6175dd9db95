// biofm prepare (data/prepare.h) and prepared datasets read for training (data/prepared.h).
#include "biofm/data/prepare.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "biofm/data/causal.h"
#include "biofm/data/dataset.h"
#include "biofm/data/mlm.h"
#include "biofm/data/prepared.h"
#include "biofm/io/atomic_file.h"
#include "data/data_test_util.h"

using namespace biofm;
using namespace biofm::testing;
namespace fs = std::filesystem;

namespace {

PrepareOptions options(const std::string& input, const std::string& out, const std::string& tok = "esm") {
  PrepareOptions o;
  o.input = input;
  o.output = out;
  o.tokenizer = tok;
  o.threads = 2;
  return o;
}

std::vector<std::vector<int32_t>> all_records(const SequenceCorpus& c, const Tokenizer& tok) {
  std::vector<std::vector<int32_t>> out(c.size());
  for (uint64_t i = 0; i < c.size(); ++i) c.append_tokens(i, 0, c.length(i), tok, out[i]);
  return out;
}

nlohmann::json manifest(const std::string& dir) { return nlohmann::json::parse(read_file(dir + "/manifest.json")); }

// i written with residues (digits would all be <unk>): distinct numbers, distinct token ids.
std::string residues_of(int i) {
  std::string s;
  for (char c : std::to_string(i)) s += "ACDEFGHIKL"[c - '0'];
  return s;
}

std::string fasta(int first, int n, const std::string& seq_prefix = "MKV") {
  std::string s;
  for (int i = first; i < first + n; ++i) s += ">r" + std::to_string(i) + "\n" + seq_prefix + residues_of(i) + "W\n";
  return s;
}

}  // namespace

// The prepared copy trains exactly as the file it came from: same records, same token ids,
// so the same batches (masking included) from the same seed and cursor.
TEST(DataPrepare, PreparedBatchesEqualInMemoryBatches) {
  TempDir dir;
  const std::string in = source_path("data/proteins_sample.fasta");
  const PrepareResult r = prepare_dataset(options(in, dir.file("p")));
  const SequenceDataset mem = SequenceDataset::load(in);
  PreparedCorpus prep(dir.file("p"));
  ASSERT_EQ(prep.size(), mem.size());
  EXPECT_EQ(r.records[0], mem.size());
  EXPECT_EQ(prep.tokens(), mem.stats().bytes);
  EXPECT_EQ(prep.tokenizer(), "esm");
  EXPECT_EQ(all_records(prep, esm_tokenizer()), all_records(mem, esm_tokenizer()));

  MlmOptions o;
  o.max_seq_length = 128;
  o.max_tokens_per_batch = 1024;
  MlmBatcher a(mem, o), b(prep, o);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(same_batch(a.next(), b.next())) << "batch " << i;
  b.set_cursor(a.cursor() + 17);  // any cursor: still the same stream
  a.set_cursor(a.cursor() + 17);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(same_batch(a.next(), b.next())) << "batch after seek " << i;
}

TEST(DataPrepare, DnaWindowsFromPreparedShardsEqualInMemory) {
  TempDir dir;
  const std::string in = source_path("data/dna_sample.fasta");
  prepare_dataset(options(in, dir.file("p"), "nucleotide"));
  const SequenceDataset mem = SequenceDataset::load(in);
  PreparedCorpus prep(dir.file("p"));
  CausalLmOptions o;
  o.max_seq_length = 256;
  o.stride = 16;
  o.max_tokens_per_batch = 1024;
  CausalLmBatcher a(mem, o), b(prep, o);
  ASSERT_EQ(a.num_samples(), b.num_samples());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(same_batch(a.next(), b.next())) << "batch " << i;
}

TEST(DataPrepare, SplitByNameHashIsStableWhenFilesAreAdded) {
  TempDir dir;
  const std::string a = dir.write("a.fasta", fasta(0, 1000)), b = dir.write("b.fasta", fasta(1000, 1000, "MQW"));
  PrepareOptions o = options(a, dir.file("one"));
  o.val_fraction = 0.1;
  o.test_fraction = 0.05;
  const PrepareResult r1 = prepare_dataset(o);
  EXPECT_EQ(r1.records[0] + r1.records[1] + r1.records[2], 1000u);
  EXPECT_NEAR(double(r1.records[1]), 100, 30);  // binomial(1000, 0.1): sd 9.5
  EXPECT_NEAR(double(r1.records[2]), 50, 22);
  o.input = a + "," + b;
  o.output = dir.file("two");
  prepare_dataset(o);
  for (const char* split : {"val", "test", "train"}) {
    PreparedOpenOptions po;
    po.split = split;
    auto one = all_records(PreparedCorpus(dir.file("one"), po), esm_tokenizer());
    auto two = all_records(PreparedCorpus(dir.file("two"), po), esm_tokenizer());
    // a's records come first in both, in order: the split of each is unchanged by adding b.
    ASSERT_GE(two.size(), one.size()) << split;
    EXPECT_TRUE(std::equal(one.begin(), one.end(), two.begin())) << split;
  }
  // The same key always lands in the same split; the fractions are honoured.
  int val = 0;
  for (int i = 0; i < 100000; ++i) val += split_of("seq" + std::to_string(i), 0.2, 0.0) == 1;
  EXPECT_NEAR(val / 1e5, 0.2, 0.005);
  EXPECT_EQ(split_of("abc", 0.5, 0.5), split_of("abc", 0.5, 0.5));
}

TEST(DataPrepare, DedupKeepsTheFirstOccurrenceWhateverTheThreads) {
  TempDir dir;
  // b repeats 300 of a's sequences (under other names) and 10 of its own.
  std::string bt;
  for (int i = 0; i < 300; ++i) bt += ">dup" + std::to_string(i) + "\nMKV" + residues_of(i * 3) + "W\n";
  for (int i = 0; i < 10; ++i) bt += ">self" + std::to_string(i) + "\nWWWWW\n";
  const std::string a = dir.write("a.fasta", fasta(0, 1000)), b = dir.write("b.fasta", bt);
  const std::string c = dir.write("c.fasta", fasta(5000, 400));
  std::vector<uint32_t> crcs[2];
  for (int threads : {1, 3}) {
    PrepareOptions o = options(a + "," + b + "," + c, dir.file("d" + std::to_string(threads)));
    o.dedup = true;
    o.threads = threads;
    o.shard_bytes = 8192;  // several shards per file
    const PrepareResult r = prepare_dataset(o);
    EXPECT_EQ(r.duplicates, 300u + 9u);
    EXPECT_EQ(r.records[0], 1000u + 1u + 400u);
    const nlohmann::json m = manifest(o.output);
    for (const auto& s : m["splits"]["train"]["shards"]) crcs[threads == 3].push_back(s["crc32"]);
    EXPECT_GT(crcs[threads == 3].size(), 3u);
  }
  EXPECT_EQ(crcs[0], crcs[1]) << "the shards do not depend on the thread count";
  PreparedCorpus p(dir.file("d1"));
  std::set<std::vector<int32_t>> distinct;
  for (auto& r : all_records(p, esm_tokenizer())) distinct.insert(r);
  EXPECT_EQ(distinct.size(), p.size());
}

TEST(DataPrepare, RestartReusesFinishedFilesAndRedoesTheRest) {
  TempDir dir;
  std::string spec;
  for (int f = 0; f < 4; ++f) spec += (f ? "," : "") + dir.write("f" + std::to_string(f) + ".fasta", fasta(f * 100, 100));
  PrepareOptions o = options(spec, dir.file("p"));
  o.val_fraction = 0.2;
  const PrepareResult first = prepare_dataset(o);
  const nlohmann::json m1 = manifest(o.output);
  // As a killed run leaves it: no manifest, file 2's part record and one of its shards gone,
  // a temporary left over.
  fs::remove(o.output + "/manifest.json");
  fs::remove(o.output + "/.parts/00002.json");
  fs::remove(o.output + "/train-00002-0000.shard");
  std::ofstream(o.output + "/train-00003-0000.shard.tmp.12345") << "half";
  const PrepareResult again = prepare_dataset(o);
  EXPECT_EQ(again.reused_files, 3u);
  EXPECT_EQ(manifest(o.output)["splits"], m1["splits"]);
  EXPECT_EQ(again.records[0], first.records[0]);
  // A changed source is made again.
  dir.write("f1.fasta", fasta(100, 50));
  const PrepareResult changed = prepare_dataset(o);
  EXPECT_EQ(changed.reused_files, 3u);
  EXPECT_EQ(changed.records[0] + changed.records[1], 350u);
  // Other options: nothing is reused.
  o.val_fraction = 0.3;
  EXPECT_EQ(prepare_dataset(o).reused_files, 0u);
}

// Residues training learns nothing about (ESM-2: read as <unk>) are counted as the records are
// tokenized, per input file (so a restart that reuses a file keeps its counts), for the note
// prepare prints and the manifest.
TEST(DataPrepare, ResiduesOutsideTheAlphabetAreCounted) {
  TempDir dir;
  const std::string spec = dir.write("a.fasta", ">a\nMKJV\n>b\nMKV\n") + "," + dir.write("b.fasta", ">c\nM1K1\n");
  const PrepareOptions o = options(spec, dir.file("p"));
  const PrepareResult r = prepare_dataset(o);
  EXPECT_EQ(r.outside_alphabet.text(), "3 residues in 2 records are not in the protein alphabet and read as <unk> "
                                       "(seen: 'J', '1'): context only, never a masked-LM target");
  EXPECT_EQ(manifest(o.output)["outside_alphabet"]["residues"], 3);
  EXPECT_EQ(manifest(o.output)["outside_alphabet"]["records"], 2);
  fs::remove(o.output + "/.parts/00001.json");
  const PrepareResult again = prepare_dataset(o);
  EXPECT_EQ(again.reused_files, 1u);
  EXPECT_EQ(again.outside_alphabet.text(), r.outside_alphabet.text());
  const PrepareResult dna = prepare_dataset(options(dir.write("c.fasta", ">d\nACGTacgtNNRY\n"), dir.file("q"), "nucleotide"));
  EXPECT_EQ(dna.outside_alphabet.residues, 2u);
  EXPECT_EQ(dna.outside_alphabet.examples, "RY");
}

TEST(DataPrepare, CorruptOrMissingShardsAreNamed) {
  TempDir dir;
  PrepareOptions o = options(source_path("data/proteins_val.fasta"), dir.file("p"));
  prepare_dataset(o);
  const std::string shard = o.output + "/train-00000-0000.shard";
  {  // one flipped token byte: only the CRC32 sees it
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x07');
  }
  std::string e = error_of([&] { PreparedCorpus c(o.output); });
  EXPECT_TRUE(contains(e, "corrupt shard " + shard) && contains(e, "CRC32")) << e;
  PreparedOpenOptions background;
  background.verify_in_background = true;
  {
    PreparedCorpus c(o.output, background);  // returns before the check ends
    e = error_of([&] { c.wait_verified(); });
    EXPECT_TRUE(contains(e, "corrupt shard " + shard) && contains(e, "CRC32")) << e;
    e = error_of([&] { (void)c.length(0); });  // and every read after it
    EXPECT_TRUE(contains(e, "corrupt shard " + shard)) << e;
  }
  PreparedOpenOptions no_crc;
  no_crc.verify_checksums = false;
  EXPECT_NO_THROW(PreparedCorpus(o.output, no_crc));
  fs::resize_file(shard, fs::file_size(shard) + 3);
  e = error_of([&] { PreparedCorpus c(o.output, no_crc); });
  EXPECT_TRUE(contains(e, "corrupt shard " + shard)) << e;
  fs::remove(shard);
  e = error_of([&] { PreparedCorpus c(o.output); });
  EXPECT_TRUE(contains(e, "shard train-00000-0000.shard is missing")) << e;
  PreparedOpenOptions test;
  test.split = "test";
  EXPECT_TRUE(contains(error_of([&] { PreparedCorpus c(o.output, test); }), "split 'test' holds no records"));
  write_file_atomic(o.output + "/manifest.json", "{\"format\": \"x\"}");
  EXPECT_TRUE(contains(error_of([&] { PreparedCorpus c(o.output); }), o.output + "/manifest.json"));
}

TEST(DataPrepare, MalformedRecordsFailNamingThemOrAreCountedWithSkip) {
  TempDir dir;
  const std::string good = dir.write("a.jsonl", "{\"sequence\": \"MKV\"}\n{\"sequence\": \"MQQ\"}\n");
  const std::string bad = dir.write("b.jsonl", "{\"sequence\": \"MKW\"}\n{\"sequence\": 12}\nnot json\n{\"sequence\": \"AC\"}\n");
  PrepareOptions o = options(good + "," + bad, dir.file("p"));
  const std::string e = error_of([&] { prepare_dataset(o); });
  EXPECT_TRUE(contains(e, bad + ":2: field 'sequence' is not a string")) << e;
  EXPECT_FALSE(fs::exists(o.output + "/manifest.json"));
  o.reader.skip_malformed = true;
  const PrepareResult r = prepare_dataset(o);
  EXPECT_EQ(r.records[0], 4u);
  EXPECT_EQ(r.skipped_malformed, 2u);
  const nlohmann::json m = manifest(o.output);
  EXPECT_EQ(m["skipped_malformed"], 2);
  EXPECT_TRUE(contains(m["first_error"].get<std::string>(), bad + ":2:"));
  EXPECT_EQ(PreparedCorpus(o.output).skipped_records(), 2u);
}

TEST(DataPrepare, OptionsAreChecked) {
  TempDir dir;
  PrepareOptions o = options(source_path("data/proteins_val.fasta"), dir.file("p"));
  o.val_fraction = 0.7;
  o.test_fraction = 0.5;
  EXPECT_TRUE(contains(error_of([&] { prepare_dataset(o); }), "sum <= 1"));
  o = options(source_path("data/proteins_val.fasta"), dir.file("p"), "bpe");
  EXPECT_TRUE(contains(error_of([&] { prepare_dataset(o); }), "unknown tokenizer 'bpe'"));
  EXPECT_FALSE(is_prepared_dir(dir.file("p")));
}
