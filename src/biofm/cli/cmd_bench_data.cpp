// biofm bench-data: how fast the training loader opens a dataset and builds batches on one
// thread (docs/DATA.md, "Measured"), and a synthetic prepared dataset of any size to try it on.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "biofm/cli/commands.h"
#include "biofm/cli/flags.h"
#include "biofm/cli/model_flags.h"
#include "biofm/data/prepare.h"
#include "biofm/data/prepared.h"
#include "biofm/data/stream.h"
#include "biofm/models/registry.h"

namespace biofm {

const CommandSpec kBenchDataSpec{
    .name = "bench-data",
    .synopsis =
        "--data DATA --family esm2|llama [--seconds 5] [--max-seq-length N] [--max-tokens N] [--streaming] [--json]\n"
        "       biofm bench-data --synthetic N --output DIR [--length 12] [--files 16] [--threads N]",
    .summary = "loader throughput and memory on one thread; --synthetic N writes a test dataset",
    .flags = {{"--data", "DATA", "dataset to read"},
     {"--family", "NAME", "esm2 (masked LM batches) | llama (causal windows); default esm2"},
     {"--seconds", "S", "how long to build batches (default 5)"},
     {"--max-seq-length", "N", "tokens per sequence (default 1024)"},
     {"--max-tokens", "N", "packed tokens per batch (default 16384)"},
     {"--no-verify", "", "skip the CRC32 check of prepared shards at open"},
     {"--split", "train|val|test", "split of a prepared dataset (default train)"},
     {"--streaming", "", "stream the raw files through a shuffle buffer (dataset.streaming)"},
     {"--shuffle-buffer", "N", "with --streaming: items in the buffer (default 10000)"},
     {"--json", "", "one JSON object instead of text"},
     {"--synthetic", "N", "write a synthetic prepared dataset of N records to --output"},
     {"--output", "DIR", "where --synthetic writes"},
     {"--length", "L", "residues per synthetic record (default 12)"},
     {"--files", "K", "synthetic text files prepared in parallel (default 16)"},
     {"--threads", "N", "prepare threads for --synthetic (default: all cores)"}},
    .details =
        "Loader throughput: opens DATA (a `biofm prepare` directory or anything dataset.path takes) as\n"
        "training does, then builds packed, masked (esm2) or windowed (llama) batches on this one thread\n"
        "for --seconds; prints the open time, tokens/s and peak resident memory. With --synthetic, writes\n"
        "a prepared dataset of N random protein records of --length residues through biofm prepare.",
};

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double peak_rss_mb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;
}

// A field of /proc/self/status in MB (RssAnon: the process's own memory; RssFile: pages of
// mapped files, the shards, which the kernel can drop and read again).
double status_mb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string k;
  double kb = 0;
  while (in >> k) {
    if (k == std::string(key) + ":") {
      in >> kb;
      return kb / 1024.0;
    }
    std::getline(in, k);
  }
  return -1;
}

int synthetic(const Flags& f) {
  const uint64_t n = uint64_t(f.get_int("--synthetic", 0, 1, 1LL << 40));
  const std::string out = f.require("--output");
  const int length = int(f.get_int("--length", 12, 1, 100000));
  const int files = int(f.get_int("--files", 16, 1, 100000));
  const std::string text_dir = out + ".text";
  std::filesystem::create_directories(text_dir);
  const char residues[] = "LAGVSERTIDPKQNFYMHWC";
  const double t0 = now_s();
  std::string line(size_t(length) + 1, '\n');
  for (int k = 0; k < files; ++k) {
    char name[32];
    std::snprintf(name, sizeof name, "/part_%05d.txt", k);
    std::ofstream os(text_dir + name, std::ios::binary);
    const uint64_t lo = n * uint64_t(k) / uint64_t(files), hi = n * uint64_t(k + 1) / uint64_t(files);
    uint64_t x = 0x9E3779B97F4A7C15ull * uint64_t(k + 1);  // a plain LCG: random enough for a load test
    for (uint64_t r = lo; r < hi; ++r) {
      for (int t = 0; t < length; ++t) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        line[size_t(t)] = residues[(x >> 33) % 20];
      }
      os.write(line.data(), std::streamsize(line.size()));
    }
  }
  const double t1 = now_s();
  PrepareOptions o;
  o.input = text_dir;
  o.output = out;
  o.tokenizer = "esm";
  o.threads = int(f.get_int("--threads", 0, 0, 4096));
  const PrepareResult r = prepare_dataset(o);
  std::filesystem::remove_all(text_dir);
  std::printf("bench-data: %llu synthetic records of %d residues in %s (text %.1f s, prepare %.1f s: %.1f MB/s)\n",
              (unsigned long long)r.records[0], length, out.c_str(), t1 - t0, r.seconds,
              double(r.input_bytes) / 1e6 / r.seconds);
  return 0;
}

}  // namespace

int cmd_bench_data(int argc, char** argv) {
  const Flags f = parse_flags(kBenchDataSpec, argc, argv);
  if (f.help()) {
    print_help(kBenchDataSpec);
    return 0;
  }
  f.expect_no_positional();
  if (f.has("--synthetic")) return synthetic(f);
  const std::string data = f.require("--data");
  const ModelFamily& family = parse_family(f.get("--family", "esm2"));
  const double seconds = f.get_double("--seconds", 5.0, 0.0, 3600.0);
  DataOptions o;
  o.max_seq_length = f.get_int("--max-seq-length", 1024, 3, kMaxFlagTokens);
  o.max_tokens_per_batch = f.get_int("--max-tokens", 16384, o.max_seq_length, kMaxFlagTokens);

  const double t0 = now_s();
  std::unique_ptr<SequenceCorpus> corpus;
  if (is_prepared_dir(data)) {
    PreparedOpenOptions po;
    po.split = f.get("--split", "train");
    po.verify_checksums = !f.has("--no-verify");
    auto prepared = std::make_unique<PreparedCorpus>(data, po);
    require_prepared_tokenizer(*prepared, data, family.tokenizer(), "--family " + family.name);
    corpus = std::move(prepared);
  } else if (f.has("--streaming")) {
    const uint64_t buffer = uint64_t(f.get_int("--shuffle-buffer", 10000, 1, 1LL << 31));
    corpus = std::make_unique<StreamingCorpus>(data, stream_options(o, family.objective == Objective::CausalLM, buffer));
  } else {
    corpus = std::make_unique<SequenceDataset>(SequenceDataset::load(data));
  }
  const double t_open = now_s() - t0;
  auto source = family.batches(o, *corpus);
  Batch first = source->next();
  const double t_first = now_s() - t0;
  uint64_t tokens = uint64_t(first.num_real_tokens), batches = 1, labels = uint64_t(first.num_label_tokens);
  const double start = now_s();
  double elapsed = 0;
  while (elapsed < seconds) {
    Batch b = source->next();
    tokens += uint64_t(b.num_real_tokens);
    labels += uint64_t(b.num_label_tokens);
    ++batches;
    elapsed = now_s() - start;
  }
  // (a stream has no size: what it read)
  const auto* stream = dynamic_cast<const StreamingCorpus*>(corpus.get());
  const uint64_t records = stream ? stream->records_read() : corpus->size();
  const double tps = elapsed > 0 ? double(tokens - uint64_t(first.num_real_tokens)) / elapsed : 0.0;
  if (f.has("--json")) {
    nlohmann::json j = {{"data", data},          {"family", family.name},   {"records", records},
                        {"open_s", t_open},      {"first_batch_s", t_first}, {"batches", batches},
                        {"tokens", tokens},      {"label_tokens", labels},  {"tokens_per_s", tps},
                        {"peak_rss_mb", peak_rss_mb()},  {"rss_anon_mb", status_mb("RssAnon")},
                        {"rss_file_mb", status_mb("RssFile")}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "bench-data: %s (%s): %llu records; open %.3f s, first batch at %.3f s; %llu batches, %.3g tokens/s on one "
        "thread (%.0f tokens per batch); peak RSS %.0f MB, now %.0f MB own (RssAnon) + %.0f MB of mapped files "
        "(RssFile: %s)\n",
        data.c_str(), corpus->summary().c_str(), (unsigned long long)records, t_open, t_first,
        (unsigned long long)batches, tps, double(tokens) / double(batches), peak_rss_mb(), status_mb("RssAnon"),
        status_mb("RssFile"), is_prepared_dir(data) ? "the shards and the program" : "the program and its libraries");
  }
  return 0;
}

}  // namespace biofm
