// biofm prepare: a dataset tokenized once into memory-mapped shards (data/prepare.h).
#include <algorithm>
#include <cstdio>
#include <optional>

#include "biofm/cli/commands.h"
#include "biofm/cli/flags.h"
#include "biofm/cli/model_flags.h"
#include "biofm/core/notes.h"
#include "biofm/data/input_files.h"
#include "biofm/data/prepare.h"
#include "biofm/data/prepared.h"
#include "biofm/data/reader.h"
#include "biofm/models/registry.h"

namespace biofm {

const CommandSpec kPrepareSpec{
    .name = "prepare",
    .synopsis =
        "--input DATA --output DIR --family esm2|llama [--val-fraction F] [--test-fraction F] [--dedup] [--threads N]",
    .summary = "tokenize a dataset once into memory-mapped shards for training",
    .flags = {{"--input", "DATA", "what to read (the forms dataset.path takes)"},
     {"--output", "DIR", "output directory (created)"},
     {"--family", "NAME", "model family whose tokenizer to use: esm2 (protein) | llama (DNA)"},
     format_flag(),
     {"--column", "NAME", "CSV/TSV column or JSONL field of the sequence (default: sequence)"},
     {"--name-column", "NAME", "CSV/TSV column or JSONL field naming the record (split key)"},
     {"--val-fraction", "F", "fraction of records for the val split (default 0)"},
     {"--test-fraction", "F", "fraction of records for the test split (default 0)"},
     {"--dedup", "", "keep only the first occurrence of identical sequences"},
     {"--cluster-column", "NAME", "column naming each record's cluster (UniRef50 id): split by cluster, "
                                  "and write a cluster index for cluster sampling"},
     {"--on-error", "fail|skip", "malformed records: stop with an error (default) or skip and count"},
     {"--threads", "N", "worker threads (default: all cores)"},
     {"--shard-mb", "MB", "shard size in MiB (default 256)"},
     {"--quiet", "", "no progress line"}},
    .details =
        "Tokenizes DATA (a file, directory, glob or comma-separated list; FASTA, CSV, TSV, JSONL or text,\n"
        "optionally gzip/zstd, or Parquet) with the model family's tokenizer into DIR: shards of token ids and offsets,\n"
        "memory-mapped by training (dataset.path=DIR, dataset.split=train|val|test), and DIR/manifest.json\n"
        "(counts, tokenizer, shard sizes and CRC32s, source files). Records are split by a hash of their\n"
        "name. Files are processed in parallel; a killed run restarts where it stopped.",
};

int cmd_prepare(int argc, char** argv) {
  const Flags f = parse_flags(kPrepareSpec, argc, argv);
  if (f.help()) {
    print_help(kPrepareSpec);
    return 0;
  }
  f.expect_no_positional();
  PrepareOptions o;
  o.input = f.require("--input");
  o.output = f.require("--output");
  o.tokenizer = tokenizer_name(parse_family(f.require("--family")).tokenizer());
  o.reader = reader_options(f);  // --format, --column
  o.reader.name_column = f.get("--name-column", "");
  o.reader.skip_malformed = f.get("--on-error", "fail") == "skip";  // (fail|skip: parse_flags)
  o.val_fraction = f.get_double("--val-fraction", 0.0, 0.0, 1.0);
  o.test_fraction = f.get_double("--test-fraction", 0.0, 0.0, 1.0);
  o.dedup = f.has("--dedup");
  if (o.val_fraction + o.test_fraction > 1)
    f.fail_usage("--val-fraction and --test-fraction must sum to at most 1 (got ", o.val_fraction, " + ",
                 o.test_fraction, ")");
  o.cluster_column = f.get("--cluster-column", "");
  if (!o.cluster_column.empty() && !o.reader.name_column.empty())
    f.fail_usage("give --cluster-column or --name-column, not both (with clusters, the split goes by cluster)");
  o.threads = int(f.get_int("--threads", 0, 0, 4096));
  o.shard_bytes = uint64_t(f.get_int("--shard-mb", 256, 1, 1 << 20)) << 20;
  o.progress = !f.has("--quiet");
  // (the files prepare reads, for a remark on directory entries it skips)
  const InputFiles inputs = expand_inputs(o.input);
  note_unused_column_flags(f, o.input);  // (FASTA and text inputs have no columns)
  const PrepareResult r = prepare_dataset(o);
  std::printf(
      "prepare: %s -> %s: %llu files (%llu reused), %.1f MB in %.2f s (%.1f MB/s); train %llu / val %llu / test "
      "%llu records, %llu tokens in %llu shards; %llu duplicates removed, %llu empty and %llu malformed records "
      "skipped\n",
      o.input.c_str(), o.output.c_str(), (unsigned long long)r.files, (unsigned long long)r.reused_files,
      double(r.input_bytes) / 1e6, r.seconds, r.seconds > 0 ? double(r.input_bytes) / 1e6 / r.seconds : 0.0,
      (unsigned long long)r.records[0], (unsigned long long)r.records[1], (unsigned long long)r.records[2],
      (unsigned long long)(r.tokens[0] + r.tokens[1] + r.tokens[2]), (unsigned long long)r.shards,
      (unsigned long long)r.duplicates, (unsigned long long)r.skipped_empty, (unsigned long long)r.skipped_malformed);
  if (const std::string outside = r.outside_alphabet.text(); !outside.empty()) note(o.input + ": " + outside);
  if (r.removed_temporaries)
    std::printf("prepare: removed %llu temporary file%s left in %s by a run that was killed\n",
                (unsigned long long)r.removed_temporaries, r.removed_temporaries == 1 ? "" : "s", o.output.c_str());
  // A split that was asked for and got no record (a few large records, e.g. genomes, split by name).
  const double asked[3] = {1 - o.val_fraction - o.test_fraction, o.val_fraction, o.test_fraction};
  const char* split_names[3] = {"train", "val", "test"};
  const uint64_t total = r.records[0] + r.records[1] + r.records[2];
  for (int s = 0; s < 3; ++s)
    if (asked[s] > 0 && r.records[s] == 0 && total > 0)
      std::fprintf(stderr,
                   "warning: the %s split is empty: a fraction of %g of %llu record%s gave none (records go to a "
                   "split by a hash of their %s); training on it will fail\n",
                   split_names[s], asked[s], (unsigned long long)total, total == 1 ? "" : "s",
                   o.cluster_column.empty() ? "name" : "cluster");
  if (inputs.skipped)
    std::printf("prepare: %llu directory entr%s skipped: not a sequence file by its extension\n",
                (unsigned long long)inputs.skipped, inputs.skipped == 1 ? "y" : "ies");
  if (!o.cluster_column.empty())
    std::printf("prepare: clusters (column %s): train %llu / val %llu / test %llu\n", o.cluster_column.c_str(),
                (unsigned long long)r.clusters[0], (unsigned long long)r.clusters[1], (unsigned long long)r.clusters[2]);
  return 0;
}

}  // namespace biofm
