// UniRef-style cluster sampling (data/clusters.h, prepare --cluster-column, PreparedCorpus):
// the split goes by cluster, an epoch visits every cluster once, members are drawn per epoch,
// corrupt indexes are named.
#include "biofm/data/clusters.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "biofm/data/blend.h"
#include "biofm/data/causal.h"
#include "biofm/data/mlm.h"
#include "biofm/data/prepare.h"
#include "biofm/data/prepared.h"
#include "biofm/io/atomic_file.h"
#include "data/data_test_util.h"

using namespace biofm;
using namespace biofm::testing;
namespace fs = std::filesystem;

namespace {

// Residues naming a number (digits would be <unk>).
std::string residues_of(int i) {
  std::string s;
  for (char c : std::to_string(i)) s += "ACDEFGHIKL"[c - '0'];
  return s;
}

// A UniProt-style TSV of UniRef90 members: cluster c (UniRef50_c) has 1 + c % 4 members, whose
// sequences are "M" + cluster + "W" + member, so a sequence tells its cluster.
std::string members_tsv(int first_cluster, int clusters, int* records = nullptr) {
  std::string s = "Entry\tCluster\tSequence\n";
  int n = 0;
  for (int c = first_cluster; c < first_cluster + clusters; ++c)
    for (int m = 0; m <= c % 4; ++m, ++n)
      s += "UniRef90_" + std::to_string(c) + "_" + std::to_string(m) + "\tUniRef50_" + std::to_string(c) + "\tM" +
           residues_of(c) + "W" + residues_of(m) + "\n";
  if (records) *records = n;
  return s;
}

PrepareOptions cluster_options(const std::string& input, const std::string& out) {
  PrepareOptions o;
  o.input = input;
  o.output = out;
  o.threads = 2;
  o.cluster_column = "Cluster";
  return o;
}

std::string record_text(const SequenceCorpus& c, uint64_t r) {
  std::vector<int32_t> ids;
  c.append_tokens(r, 0, c.length(r), esm_tokenizer(), ids);
  std::string s;
  for (int32_t id : ids) s += esm_tokenizer().vocab()[size_t(id)];
  return s;
}

// "M<cluster>W<member>" → the cluster's residue string.
std::string cluster_of(const std::string& seq) { return seq.substr(1, seq.find('W') - 1); }

}  // namespace

TEST(DataClusters, PrepareSplitsByClusterAndEveryEpochVisitsEachClusterOnce) {
  TempDir d;
  int ra = 0, rb = 0;
  const std::string a = d.write("a.tsv", members_tsv(0, 60, &ra)), b = d.write("b.tsv", members_tsv(60, 40, &rb));
  PrepareOptions o = cluster_options(a + "," + b, d.file("p"));
  o.val_fraction = 0.2;
  const PrepareResult r = prepare_dataset(o);
  EXPECT_EQ(r.records[0] + r.records[1], uint64_t(ra + rb));
  EXPECT_EQ(r.clusters[0] + r.clusters[1], 100u);
  EXPECT_GT(r.clusters[1], 5u);

  PreparedOpenOptions po;
  po.seed = 11;
  PreparedCorpus train(d.file("p"), po);
  po.split = "val";
  PreparedCorpus val(d.file("p"), po);
  ASSERT_TRUE(train.clustered());
  EXPECT_EQ(train.size(), r.clusters[0]);
  EXPECT_EQ(train.records(), r.records[0]);
  EXPECT_TRUE(contains(train.summary(), std::to_string(r.clusters[0]) + " clusters")) << train.summary();

  // Whole clusters go to one split: no cluster has members on both sides.
  std::set<std::string> train_clusters, val_clusters;
  for (uint64_t i = 0; i < train.records(); ++i) train_clusters.insert(cluster_of(record_text(train, i)));
  for (uint64_t i = 0; i < val.records(); ++i) val_clusters.insert(cluster_of(record_text(val, i)));
  for (const auto& c : val_clusters) EXPECT_EQ(train_clusters.count(c), 0u) << c;
  EXPECT_EQ(train_clusters.size(), train.size());

  // resolve(c, epoch) is always a member of cluster c; over epochs every member is drawn.
  std::map<std::string, std::set<std::string>> drawn;
  for (uint64_t e = 0; e < 40; ++e)
    for (uint64_t c = 0; c < train.size(); ++c) {
      const std::string s = record_text(train, train.resolve(c, e));
      EXPECT_EQ(cluster_of(s), cluster_of(record_text(train, train.resolve(c, 0))));
      drawn[cluster_of(s)].insert(s);
    }
  uint64_t members = 0;
  for (const auto& [c, m] : drawn) members += m.size();
  EXPECT_EQ(members, train.records()) << "every member is drawn in 40 epochs (clusters have at most 4)";
  EXPECT_EQ(train.resolve(3, 5), train.resolve(3, 5));

  // The MLM batcher: an epoch is one sample per cluster, each cluster exactly once.
  MlmOptions mo;
  mo.max_tokens_per_batch = 1024;
  mo.max_seq_length = 64;
  MlmBatcher m(train, mo);
  std::multiset<std::string> seen;
  for (uint64_t k = 0; k < train.size(); ++k) seen.insert(cluster_of(record_text(train, train.resolve(permute_index(k, train.size(), mo.seed, 0), 0))));
  EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), train.size());
  while (m.epoch() < 3) m.next();
  EXPECT_EQ(m.stats().sequences, m.cursor());
  EXPECT_EQ(m.epoch(), m.cursor() / train.size()) << "an epoch is one sample per cluster";

  // Without cluster sampling every record is a sample.
  PreparedOpenOptions flat;
  flat.cluster_sampling = false;
  PreparedCorpus all(d.file("p"), flat);
  EXPECT_FALSE(all.clustered());
  EXPECT_EQ(all.size(), r.records[0]);
  // Causal batches and blends refuse clustered data.
  EXPECT_TRUE(contains(error_of([&] { CausalLmBatcher c(train, CausalLmOptions{}); }), "cluster sampling"));
  EXPECT_TRUE(contains(error_of([&] {
                         std::vector<std::unique_ptr<SequenceCorpus>> sources;
                         sources.push_back(std::make_unique<PreparedCorpus>(d.file("p"), po));
                         BlendCorpus blend(std::move(sources), {1.0}, {"p"}, 1);
                       }),
                       "samples by cluster"));
}

TEST(DataClusters, RestartReusesTheKeysAndGivesTheSameIndex) {
  TempDir d;
  const std::string a = d.write("a.tsv", members_tsv(0, 30)), b = d.write("b.tsv", members_tsv(30, 30));
  const PrepareOptions o = cluster_options(a + "," + b, d.file("p"));
  prepare_dataset(o);
  const std::string first = read_file(d.file("p/train.clusters"));
  fs::remove(d.file("p/.parts/00001.json"));  // as if killed before the second file finished
  const PrepareResult again = prepare_dataset(o);
  EXPECT_EQ(again.reused_files, 1u);
  EXPECT_EQ(read_file(d.file("p/train.clusters")), first);
  // Two threads or one: the same index (clusters are ordered by their name's hash).
  PrepareOptions one = o;
  one.threads = 1;
  one.output = d.file("q");
  prepare_dataset(one);
  EXPECT_EQ(read_file(d.file("q/train.clusters")), first);
}

TEST(DataClusters, BadInputIsNamed) {
  TempDir d;
  const std::string no_id = d.write("x.tsv", "Cluster\tSequence\nU50_1\tMKV\n\tMKT\n");
  EXPECT_TRUE(contains(error_of([&] { prepare_dataset(cluster_options(no_id, d.file("n"))); }), "x.tsv:3: no cluster id"));
  const std::string fa = d.write("x.fasta", ">a\nMKV\n");
  EXPECT_TRUE(contains(error_of([&] { prepare_dataset(cluster_options(fa, d.file("f"))); }), "x.fasta is fasta, which has no column"));
  PrepareOptions both = cluster_options(no_id, d.file("n"));
  both.reader.name_column = "Entry";
  EXPECT_TRUE(contains(error_of([&] { prepare_dataset(both); }), "not both"));

  const std::string in = d.write("m.tsv", members_tsv(0, 20));
  prepare_dataset(cluster_options(in, d.file("p")));
  const std::string index = d.file("p/train.clusters");
  const std::string good = read_file(index);
  {  // truncated
    std::ofstream(index, std::ios::binary | std::ios::trunc) << good.substr(0, good.size() - 8);
    EXPECT_TRUE(contains(error_of([&] { PreparedCorpus c(d.file("p")); }), "corrupt cluster index " + index));
  }
  {  // a member that is not a record of the split: named on use, before the CRC says so
    std::string bad = good;
    const uint64_t huge = uint64_t(1) << 40;
    std::memcpy(bad.data() + bad.size() - 8, &huge, 8);
    std::ofstream(index, std::ios::binary | std::ios::trunc) << bad;
    PreparedOpenOptions po;
    po.verify_checksums = false;
    PreparedCorpus c(d.file("p"), po);
    std::string err;
    for (uint64_t k = 0; k < c.size() && err.empty(); ++k)
      for (uint64_t e = 0; e < 8 && err.empty(); ++e) try {
          c.resolve(k, e);
        } catch (const Error& x) {
          err = x.what();
        }
    EXPECT_TRUE(contains(err, "names record 1099511627776")) << err;
    EXPECT_TRUE(contains(error_of([&] { PreparedCorpus v(d.file("p")); }), "CRC32"));
  }
  fs::remove(index);
  EXPECT_TRUE(contains(error_of([&] { PreparedCorpus c(d.file("p")); }), "cluster index train.clusters is missing"));
  PreparedOpenOptions flat;
  flat.cluster_sampling = false;
  EXPECT_NO_THROW(PreparedCorpus c(d.file("p"), flat));
}
