// `biofm prepare`: any input dataset.path takes → a directory of tokenized shards (shard.h)
// and a manifest, read for training by PreparedCorpus (prepared.h).
//
//   OUT/manifest.json                 written last: counts, tokenizer, options, shards with
//                                     sizes and CRC32s, source files with sizes and mtimes
//   OUT/<split>-<file>-<part>.shard   train | val | test; <file> = input file index (5 digits)
//   OUT/.parts/<file>.json            one per finished input file: its shards (restart state)
//   OUT/<split>-<file>.keys           with --cluster-column: each record's cluster hash (u64)
//   OUT/<split>.clusters              with --cluster-column: the split's cluster index (clusters.h)
//
// Input files are processed in parallel (one thread per file at a time). A record goes to
// val / test / train by a hash of its name (FASTA header word, or the name column; the
// sequence itself when there is none), so a record keeps its split when files are added.
// --dedup keeps the first occurrence (in input order) of each distinct sequence: a first pass
// over all files fills a hash table of sequence hashes (64-bit; about 50 bytes per distinct
// sequence), the second writes the shards. Everything is written atomically (temporary name,
// rename; the manifest last): a killed prepare leaves no manifest, and rerun with the same
// inputs and options it reuses the files already finished.
#pragma once
#include <cstdint>
#include <string>

#include "biofm/data/alphabet.h"
#include "biofm/data/reader.h"

namespace biofm {

struct PrepareOptions {
  std::string input;   // a file, directory, glob or list (input_files.h)
  std::string output;  // directory (created)
  std::string tokenizer = "esm";  // esm | nucleotide
  ReaderOptions reader;           // format, column, name_column, skip_malformed
  // UniRef-style clusters: the CSV/TSV/JSONL/Parquet column naming each record's cluster (e.g.
  // the UniRef50 id of a UniRef90 member). The split then goes by cluster (a cluster's members
  // stay together), and each split gets a cluster index (clusters.h) for cluster sampling.
  std::string cluster_column;
  double val_fraction = 0.0, test_fraction = 0.0;
  bool dedup = false;
  int threads = 0;                           // 0 = all cores
  uint64_t shard_bytes = uint64_t(256) << 20;  // a shard is closed once it reaches this size
  bool progress = false;                     // a progress line on stderr
};

struct PrepareResult {
  uint64_t files = 0, reused_files = 0;
  uint64_t input_bytes = 0;                  // sizes of the input files (as stored)
  uint64_t records[3] = {0, 0, 0};           // train, val, test
  uint64_t tokens[3] = {0, 0, 0};
  uint64_t shards = 0;
  uint64_t duplicates = 0, skipped_empty = 0, skipped_malformed = 0;
  uint64_t clusters[3] = {0, 0, 0};          // with cluster_column
  uint64_t removed_temporaries = 0;          // *.tmp.<pid> files of a killed earlier run, removed
  ResidueTally outside_alphabet;             // of the records written (data/alphabet.h: training_alphabet)
  double seconds = 0;
};

// Which split a record goes to: 0 train, 1 val, 2 test (u = a 53-bit hash of `key` in [0, 1):
// u < val → val, u < val + test → test).
int split_of(std::string_view key, double val_fraction, double test_fraction);

PrepareResult prepare_dataset(const PrepareOptions& o);

}  // namespace biofm
