#include "biofm/data/prepare.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>
#include <vector>

#include "biofm/core/error.h"
#include "biofm/core/hash.h"
#include "biofm/data/clusters.h"
#include "biofm/data/input_files.h"
#include "biofm/data/prepared.h"
#include "biofm/data/shard.h"
#include "biofm/io/atomic_file.h"
#include "biofm/io/stream_file.h"

namespace fs = std::filesystem;

namespace biofm {

namespace {

const char* const kSplitNames[3] = {"train", "val", "test"};

uint64_t sequence_hash(std::string_view s) { return mix64(fnv1a(s) ^ (uint64_t(s.size()) << 1)); }

struct SourceInfo {
  std::string path;
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;
};

SourceInfo stat_source(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail("cannot open ", path, ": no such file");
  return {path, uint64_t(st.st_size), int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

// Distinct sequence hash → the first position (file << 40 | record) holding it. Striped locks.
class FirstOccurrence {
 public:
  void offer(uint64_t hash, uint64_t pos) {
    Stripe& s = stripes_[hash % kStripes];
    std::lock_guard<std::mutex> lock(s.mu);
    auto [it, added] = s.map.try_emplace(hash, pos);
    if (!added && pos < it->second) it->second = pos;
  }
  uint64_t first(uint64_t hash) const {
    const Stripe& s = stripes_[hash % kStripes];
    return s.map.at(hash);  // read only after the first pass: no lock needed
  }

 private:
  static constexpr size_t kStripes = 64;
  struct Stripe {
    std::mutex mu;
    std::unordered_map<uint64_t, uint64_t> map;
  };
  Stripe stripes_[kStripes];
};

std::string two_digits(uint64_t v, int width) {
  std::string s = std::to_string(v);
  return s.size() >= size_t(width) ? s : std::string(size_t(width) - s.size(), '0') + s;
}

// Options that change the shards' content: a part made under other options is not reused.
std::string fingerprint(const PrepareOptions& o, const std::vector<SourceInfo>& sources) {
  nlohmann::json j = {{"tokenizer", o.tokenizer},       {"format", o.reader.format},
                      {"column", o.reader.column},      {"name_column", o.reader.name_column},
                      {"strip_stop", o.reader.strip_stop}, {"skip_malformed", o.reader.skip_malformed},
                      {"val_fraction", o.val_fraction}, {"test_fraction", o.test_fraction},
                      {"dedup", o.dedup},               {"shard_bytes", o.shard_bytes},
                      {"cluster_column", o.cluster_column},
                      {"shard_version", kShardVersion}};
  if (o.dedup) {  // which copy is kept depends on every input file
    uint64_t h = 0;
    for (const auto& s : sources) h = mix64(h ^ fnv1a(s.path) ^ mix64(s.bytes) ^ uint64_t(s.mtime_ns));
    j["inputs_hash"] = std::to_string(h);
  }
  return j.dump();
}

struct Progress {
  std::atomic<uint64_t> records{0}, residues{0}, files_done{0};
};

class Preparer {
 public:
  explicit Preparer(const PrepareOptions& o) : o_(o), tok_(tokenizer_named(o.tokenizer)) {
    if (!(o.val_fraction >= 0 && o.test_fraction >= 0 && o.val_fraction + o.test_fraction <= 1))
      fail("prepare: val and test fractions must be >= 0 with a sum <= 1 (got ", o.val_fraction, " and ",
           o.test_fraction, ")");
    if (tok_.vocab_size() > 256) fail("prepare: tokenizer ", o.tokenizer, " has more than 256 ids");
    if (o.shard_bytes < 4096) fail("prepare: shard size must be at least 4 KiB");
    if (!o.cluster_column.empty() && !o.reader.name_column.empty())
      fail("prepare: give --cluster-column or --name-column, not both (with clusters, the split goes by cluster)");
  }

  PrepareResult run() {
    const auto t0 = std::chrono::steady_clock::now();
    const InputFiles in = expand_inputs(o_.input);
    for (const auto& f : in.files) sources_.push_back(stat_source(f));
    fp_ = fingerprint(o_, sources_);
    make_dirs_writable(o_.output);
    make_dirs_writable(parts_dir());
    // Temporaries of a run that was killed (this run writes its own; a live run's stay).
    const uint64_t stale = remove_stale_temporaries(o_.output) + remove_stale_temporaries(parts_dir());
    // A manifest from an earlier run would describe shards this run may replace.
    std::error_code ec;
    fs::remove(fs::path(o_.output) / kPreparedManifest, ec);

    const size_t n = sources_.size();
    std::vector<char> todo(n, 1);
    for (size_t k = 0; k < n; ++k) todo[k] = !reusable(k);
    size_t reused = 0;
    for (char t : todo) reused += !t;
    if (o_.dedup && reused < n) {
      phase_ = "dedup pass";
      parallel(n, [&](size_t k) {
        hash_file(k);
        progress_.files_done += 1;
      });
      progress_.files_done = progress_.records = progress_.residues = 0;
    }
    phase_ = "tokenizing";
    parallel(n, [&](size_t k) {
      if (todo[k]) write_file(k);
      progress_.files_done += 1;
    });
    PrepareResult r = write_manifest();
    r.reused_files = reused;
    r.removed_temporaries = stale;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

 private:
  std::string parts_dir() const { return (fs::path(o_.output) / ".parts").string(); }
  std::string part_path(size_t k) const { return (fs::path(parts_dir()) / (two_digits(k, 5) + ".json")).string(); }

  // Runs fn(k) for every input file on o_.threads threads; the first error stops the others.
  void parallel(size_t n, const std::function<void(size_t)>& fn) {
    int threads = o_.threads > 0 ? o_.threads : int(std::max(1u, std::thread::hardware_concurrency()));
    threads = int(std::min<size_t>(size_t(threads), std::max<size_t>(n, 1)));
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::atomic<int> live{threads};
    std::exception_ptr error;
    std::mutex mu;
    auto worker = [&] {
      for (;;) {
        const size_t k = next++;
        if (k >= n || failed) break;
        try {
          fn(k);
        } catch (...) {
          std::lock_guard<std::mutex> lock(mu);
          if (!error) error = std::current_exception();
          failed = true;
        }
      }
      --live;
    };
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
    const auto start = std::chrono::steady_clock::now();
    // On a terminal the line is redrawn 5 times a second; in a log, one line every 10 s.
    const bool tty = ::isatty(2);
    for (int tick = 1; live > 0; ++tick) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (o_.progress && live > 0 && tick % (tty ? 10 : 500) == 0) print_progress(start, n, tty);
    }
    for (auto& th : pool) th.join();
    if (o_.progress) print_progress(start, n, tty), std::fprintf(stderr, tty ? "\n" : "");
    if (error) std::rethrow_exception(error);
  }

  void print_progress(std::chrono::steady_clock::time_point start, size_t n, bool tty) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double mb = double(progress_.residues) / 1e6;
    std::fprintf(stderr, "%sprepare (%s): %llu/%zu files, %llu records, %.1f M residues, %.1f M residues/s%s",
                 tty ? "\r" : "", phase_, (unsigned long long)progress_.files_done.load(), n, (unsigned long long)progress_.records.load(), mb,
                 s > 0 ? mb / s : 0.0, tty ? "   " : "\n");
    std::fflush(stderr);
  }

  ReaderOptions reader_options() const {
    ReaderOptions r = o_.reader;
    r.max_records = 0;
    if (!o_.cluster_column.empty()) r.name_column = o_.cluster_column;  // the record's name is its cluster
    return r;
  }

  void hash_file(size_t k) {
    SequenceReader reader(sources_[k].path, reader_options());
    SequenceRecord rec;
    for (uint64_t i = 0; reader.next(rec); ++i) {
      seen_.offer(sequence_hash(rec.sequence), (uint64_t(k) << 40) | i);
      progress_.records += 1;
    }
  }

  // The part file of input k, if it was made from the same source and options and its shards
  // are all there with the sizes it lists.
  bool reusable(size_t k) const {
    std::error_code ec;
    if (!fs::exists(part_path(k), ec)) return false;
    try {
      const nlohmann::json p = nlohmann::json::parse(read_file(part_path(k)));
      const SourceInfo& s = sources_[k];
      if (p.at("source").at("path") != s.path || p.at("source").at("bytes") != s.bytes ||
          p.at("source").at("mtime_ns") != s.mtime_ns || p.at("fingerprint") != fp_)
        return false;
      for (const auto& sh : p.at("shards")) {
        const fs::path f = fs::path(o_.output) / sh.at("file").get<std::string>();
        if (!fs::exists(f, ec) || fs::file_size(f, ec) != sh.at("bytes").get<uint64_t>()) return false;
      }
      for (const auto& kf : p.value("keys", nlohmann::json::array())) {
        const fs::path f = fs::path(o_.output) / kf.at("file").get<std::string>();
        if (!fs::exists(f, ec) || fs::file_size(f, ec) != kf.at("bytes").get<uint64_t>()) return false;
      }
      (void)outside_alphabet_of(p);  // (a part of an older biofm lacks it: made again)
      return true;
    } catch (const std::exception&) {
      return false;  // unreadable: made again
    }
  }

  void write_file(size_t k) {
    const SourceInfo& src = sources_[k];
    SequenceReader reader(src.path, reader_options());
    // FASTA and text have no columns: their "name" would make every record its own cluster.
    if (!o_.cluster_column.empty() &&
        (reader.format() == SequenceFormat::Fasta || reader.format() == SequenceFormat::Text))
      fail("prepare: ", src.path, " is ", format_name(reader.format()), ", which has no column '", o_.cluster_column,
           "' (--cluster-column needs CSV, TSV, JSONL or Parquet input)");
    ShardWriter writers[3];
    uint64_t parts[3] = {0, 0, 0}, duplicates = 0;
    std::vector<uint64_t> keys[3];  // with clusters: each written record's cluster hash
    nlohmann::json shards = nlohmann::json::array();
    auto flush = [&](int s) {
      if (writers[s].records() == 0) return;
      const std::string file = std::string(kSplitNames[s]) + "-" + two_digits(k, 5) + "-" + two_digits(parts[s]++, 4) + ".shard";
      const uint64_t records = writers[s].records(), tokens = writers[s].tokens();
      const FileDigest d = writers[s].write((fs::path(o_.output) / file).string());
      shards.push_back({{"split", kSplitNames[s]}, {"file", file}, {"records", records}, {"tokens", tokens},
                        {"bytes", d.bytes}, {"crc32", d.crc32}});
    };
    SequenceRecord rec;
    std::vector<int32_t> ids;
    std::vector<uint8_t> bytes;
    uint64_t pending_records = 0, pending_residues = 0;
    ResidueTally outside = training_alphabet(tok_);
    for (uint64_t i = 0; reader.next(rec); ++i) {
      if (o_.dedup && seen_.first(sequence_hash(rec.sequence)) != ((uint64_t(k) << 40) | i)) {
        ++duplicates;
        continue;
      }
      outside.add(rec.sequence);
      ids.clear();
      tok_.encode_residues(rec.sequence, ids);
      bytes.resize(ids.size());
      for (size_t t = 0; t < ids.size(); ++t) bytes[t] = uint8_t(ids[t]);  // ids < 256: checked in the constructor
      const int s = split_of(rec.name.empty() ? std::string_view(rec.sequence) : std::string_view(rec.name),
                             o_.val_fraction, o_.test_fraction);
      if (!o_.cluster_column.empty()) {
        if (rec.name.empty())
          fail(src.path, ":", rec.line, ": no cluster id (column '", o_.cluster_column, "' is empty)");
        keys[s].push_back(mix64(fnv1a(rec.name)));
      }
      writers[s].add(bytes.data(), bytes.size());
      if (writers[s].file_bytes() >= o_.shard_bytes) flush(s);
      if (++pending_records == 4096) {
        progress_.records += pending_records;
        progress_.residues += pending_residues;
        pending_records = pending_residues = 0;
      }
      pending_residues += rec.sequence.size();
    }
    progress_.records += pending_records;
    progress_.residues += pending_residues;
    for (int s = 0; s < 3; ++s) flush(s);
    nlohmann::json key_files = nlohmann::json::array();
    for (int s = 0; s < 3; ++s) {
      if (keys[s].empty()) continue;
      const std::string file = std::string(kSplitNames[s]) + "-" + two_digits(k, 5) + ".keys";
      AtomicFileWriter w((fs::path(o_.output) / file).string());
      w.write(keys[s].data(), keys[s].size() * 8);
      w.commit();
      key_files.push_back({{"split", kSplitNames[s]}, {"file", file}, {"records", keys[s].size()}, {"bytes", w.bytes()}});
    }
    const nlohmann::json part = {
        {"keys", key_files},
        {"source", {{"path", src.path}, {"bytes", src.bytes}, {"mtime_ns", src.mtime_ns}}},
        {"fingerprint", fp_},
        {"format", format_name(reader.format())},
        {"records", reader.records()},
        {"duplicates", duplicates},
        {"skipped_empty", reader.skipped_empty()},
        {"skipped_malformed", reader.skipped_malformed()},
        {"first_error", reader.first_error()},
        {"outside_alphabet",
         {{"residues", outside.residues},
          {"records", outside.records},
          {"examples", std::vector<uint8_t>(outside.examples.begin(), outside.examples.end())}}},
        {"shards", shards}};
    write_file_atomic(part_path(k), part.dump(1));
  }

  // A part file's outside_alphabet counts (write_file); throws when it has none.
  ResidueTally outside_alphabet_of(const nlohmann::json& part) const {
    const nlohmann::json& a = part.at("outside_alphabet");
    ResidueTally t = training_alphabet(tok_);
    t.residues = a.at("residues").get<uint64_t>();
    t.records = a.at("records").get<uint64_t>();
    for (const auto& c : a.at("examples")) t.examples += char(c.get<uint8_t>());
    return t;
  }

  PrepareResult write_manifest() {
    PrepareResult r;
    r.outside_alphabet = training_alphabet(tok_);
    nlohmann::json splits = nlohmann::json::object();
    for (const char* s : kSplitNames) splits[s] = {{"records", 0}, {"tokens", 0}, {"shards", nlohmann::json::array()}};
    nlohmann::json sources = nlohmann::json::array();
    std::string first_error;
    for (size_t k = 0; k < sources_.size(); ++k) {
      const nlohmann::json p = nlohmann::json::parse(read_file(part_path(k)));
      for (const auto& sh : p.at("shards")) {
        const std::string split = sh.at("split");
        const int s = split == "train" ? 0 : split == "val" ? 1 : 2;
        splits[split]["shards"].push_back({{"file", sh.at("file")}, {"records", sh.at("records")},
                                           {"tokens", sh.at("tokens")}, {"bytes", sh.at("bytes")},
                                           {"crc32", sh.at("crc32")}});
        r.records[s] += sh.at("records").get<uint64_t>();
        r.tokens[s] += sh.at("tokens").get<uint64_t>();
        r.shards += 1;
      }
      r.duplicates += p.at("duplicates").get<uint64_t>();
      r.skipped_empty += p.at("skipped_empty").get<uint64_t>();
      r.skipped_malformed += p.at("skipped_malformed").get<uint64_t>();
      r.outside_alphabet.merge(outside_alphabet_of(p));
      if (first_error.empty()) first_error = p.at("first_error").get<std::string>();
      r.input_bytes += sources_[k].bytes;
      sources.push_back({{"path", sources_[k].path},
                         {"bytes", sources_[k].bytes},
                         {"mtime_ns", sources_[k].mtime_ns},
                         {"format", p.at("format")},
                         {"records", p.at("records")},
                         {"duplicates", p.at("duplicates")},
                         {"skipped_empty", p.at("skipped_empty")},
                         {"skipped_malformed", p.at("skipped_malformed")}});
    }
    for (int s = 0; s < 3; ++s) {
      splits[kSplitNames[s]]["records"] = r.records[s];
      splits[kSplitNames[s]]["tokens"] = r.tokens[s];
    }
    if (!o_.cluster_column.empty()) write_cluster_indexes(splits, r);
    r.files = sources_.size();
    const nlohmann::json m = {
        {"format", "biofm-prepared"},
        {"format_version", kPreparedFormatVersion},
        {"biofm_version", BIOFM_VERSION},
        {"tokenizer", o_.tokenizer},
        {"vocab_size", tok_.vocab_size()},
        {"token_bytes", 1},
        {"input", o_.input},
        {"options", nlohmann::json::parse(fp_)},
        {"records", r.records[0] + r.records[1] + r.records[2]},
        {"duplicates_removed", r.duplicates},
        {"skipped_records", r.skipped_empty + r.skipped_malformed},
        {"skipped_empty", r.skipped_empty},
        {"skipped_malformed", r.skipped_malformed},
        {"first_error", first_error},
        {"outside_alphabet",
         {{"residues", r.outside_alphabet.residues},
          {"records", r.outside_alphabet.records},
          {"what", r.outside_alphabet.what}}},
        {"splits", splits},
        {"sources", sources}};
    write_file_atomic((fs::path(o_.output) / kPreparedManifest).string(), m.dump(1));
    fsync_dir(o_.output);
    return r;
  }

  // Each split's cluster index from the per-file key files, records numbered in the order the
  // manifest lists the shards (input file order; a file's records of a split are consecutive).
  void write_cluster_indexes(nlohmann::json& splits, PrepareResult& r) {
    for (int s = 0; s < 3; ++s) {
      if (r.records[s] == 0) continue;
      std::vector<std::pair<uint64_t, uint64_t>> keyed;
      keyed.reserve(size_t(r.records[s]));
      for (size_t k = 0; k < sources_.size(); ++k) {
        const nlohmann::json p = nlohmann::json::parse(read_file(part_path(k)));
        for (const auto& kf : p.value("keys", nlohmann::json::array())) {
          if (kf.at("split") != kSplitNames[s]) continue;
          MappedFile keys((fs::path(o_.output) / kf.at("file").get<std::string>()).string());
          const uint64_t n = kf.at("records").get<uint64_t>();
          if (keys.size() != n * 8) fail("prepare: ", keys.path(), " holds ", keys.size(), " bytes, not ", n * 8);
          for (uint64_t i = 0; i < n; ++i) {
            uint64_t h;
            std::memcpy(&h, keys.data() + i * 8, 8);
            keyed.emplace_back(h, uint64_t(keyed.size()));
          }
        }
      }
      if (keyed.size() != r.records[s])
        fail("prepare: the key files of split ", kSplitNames[s], " hold ", keyed.size(), " records, its shards ", r.records[s]);
      const std::string file = std::string(kSplitNames[s]) + ".clusters";
      const auto [digest, clusters] = write_cluster_index((fs::path(o_.output) / file).string(), std::move(keyed));
      splits[kSplitNames[s]]["clusters"] = {{"file", file}, {"clusters", clusters}, {"bytes", digest.bytes},
                                            {"crc32", digest.crc32}};
      r.clusters[s] = clusters;
    }
  }

  const PrepareOptions& o_;
  const Tokenizer& tok_;
  std::vector<SourceInfo> sources_;
  std::string fp_;
  FirstOccurrence seen_;
  Progress progress_;
  const char* phase_ = "";
};

}  // namespace

int split_of(std::string_view key, double val_fraction, double test_fraction) {
  const double u = double(mix64(fnv1a(key)) >> 11) * 0x1.0p-53;
  if (u < val_fraction) return 1;
  if (u < val_fraction + test_fraction) return 2;
  return 0;
}

PrepareResult prepare_dataset(const PrepareOptions& o) { return Preparer(o).run(); }

}  // namespace biofm
