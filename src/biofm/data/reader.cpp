#include "biofm/data/reader.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "biofm/core/error.h"
#include "biofm/data/csv_fields.h"
#include "biofm/data/line_reader.h"
#include "biofm/data/parquet_rows.h"

namespace biofm {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

void strip_bom(std::string& line) {
  if (line.size() >= 3 && static_cast<unsigned char>(line[0]) == 0xEF &&
      static_cast<unsigned char>(line[1]) == 0xBB && static_cast<unsigned char>(line[2]) == 0xBF)
    line.erase(0, 3);
}

}  // namespace

void clean_sequence(std::string& s, bool strip_stop) {
  s.erase(std::remove_if(s.begin(), s.end(), is_space), s.end());
  if (strip_stop)
    while (!s.empty() && s.back() == '*') s.pop_back();
}

const char* format_name(SequenceFormat f) {
  switch (f) {
    case SequenceFormat::Fasta: return "fasta";
    case SequenceFormat::Csv: return "csv";
    case SequenceFormat::Tsv: return "tsv";
    case SequenceFormat::Jsonl: return "jsonl";
    case SequenceFormat::Text: return "text";
    case SequenceFormat::Parquet: return "parquet";
  }
  return "?";
}

SequenceFormat parse_format(std::string_view name) {
  std::string n = lower(trim(name));
  if (n == "fasta" || n == "fa") return SequenceFormat::Fasta;
  if (n == "csv") return SequenceFormat::Csv;
  if (n == "tsv" || n == "tab") return SequenceFormat::Tsv;
  if (n == "jsonl" || n == "json") return SequenceFormat::Jsonl;
  if (n == "text" || n == "txt") return SequenceFormat::Text;
  if (n == "parquet") return SequenceFormat::Parquet;
  fail("unknown sequence format '", name, "' (expected fasta, csv, tsv, jsonl, text or parquet)");
}

std::optional<SequenceFormat> format_from_extension(const std::string& path) {
  std::string name = lower(std::filesystem::path(path).filename().string());
  auto ends = [&](std::string_view suf) {
    return name.size() > suf.size() && name.compare(name.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (ends(".gz")) {
    name.resize(name.size() - 3);
  } else if (ends(".zst")) {
    name.resize(name.size() - 4);
  }
  for (const char* e : {".fasta", ".fa", ".faa", ".fna", ".fas", ".ffn"})
    if (ends(e)) return SequenceFormat::Fasta;
  if (ends(".csv")) return SequenceFormat::Csv;
  if (ends(".tsv") || ends(".tab")) return SequenceFormat::Tsv;
  if (ends(".jsonl") || ends(".json")) return SequenceFormat::Jsonl;
  if (ends(".txt")) return SequenceFormat::Text;
  if (ends(".parquet")) return SequenceFormat::Parquet;
  return std::nullopt;
}

SequenceFormat detect_format(const std::string& path) {
  if (auto f = format_from_extension(path)) return *f;
  fail("cannot tell the format of ", path,
       " from its extension (known: .fasta .fa .faa .fna .fas .ffn .csv .tsv .tab .jsonl .json .txt, "
       "optionally .gz or .zst, and .parquet); name the format explicitly (fasta, csv, tsv, jsonl, text, parquet)");
}

namespace {
// A malformed record under ReaderOptions::skip_malformed: caught in next(), counted, skipped.
struct MalformedRecord : Error {
  using Error::Error;
};
}  // namespace

struct SequenceReader::Impl {
  ReaderOptions opt;
  LineReader in;  // opened first: a missing file is reported before a bad extension
  SequenceFormat format;
  uint64_t records = 0, skipped = 0, malformed = 0;
  std::string first_error;  // the first malformed record or read error skipped
  bool resync = false;      // FASTA after a skipped header: drop lines up to the next header
  bool done = false;
  std::string line;
  // FASTA: a header already read that starts the next record.
  bool have_header = false;
  std::string header_name;
  uint64_t header_line = 0;
  // CSV / TSV
  char delim = ',';
  std::vector<std::string> columns;
  size_t seq_col = 0;
  long name_col = -1;
  std::vector<std::string> fields;
  CsvFields csv;  // (its buffers reused record to record)
  // Parquet
  std::unique_ptr<ParquetRows> parquet;

  Impl(const std::string& path, const ReaderOptions& o)
      : opt(o),
        in(path),
        format(o.format.empty() || lower(o.format) == "auto" ? detect_format(path) : parse_format(o.format)) {
    if (format == SequenceFormat::Parquet) parquet = std::make_unique<ParquetRows>(path, o.column, o.name_column);
    if (format == SequenceFormat::Csv || format == SequenceFormat::Tsv) {
      delim = format == SequenceFormat::Tsv ? '\t' : ',';
      read_csv_header();
    }
  }

  void note_malformed(const std::string& what) {
    ++malformed;
    if (first_error.empty()) first_error = what;
    resync = true;
  }

  [[noreturn]] void fail_at(uint64_t line_no, const std::string& what) {
    if (opt.skip_malformed) {
      std::ostringstream os;
      os << in.path() << ":" << line_no << ": " << what;
      throw MalformedRecord(os.str());
    }
    fail(in.path(), ":", line_no, ": ", what);
  }

  // ---- FASTA ----
  void take_header(uint64_t line_no) {
    std::string_view h = trim(std::string_view(line).substr(1));
    size_t end = 0;
    while (end < h.size() && !is_space(h[end])) ++end;
    if (end == 0) fail_at(line_no, "FASTA header with no name");
    header_name.assign(h.substr(0, end));
    header_line = line_no;
    have_header = true;
  }

  bool next_fasta(SequenceRecord& rec) {
    for (;;) {
      if (!have_header) {
        // Find the first header; anything but blank lines and ';' comments before it is an error.
        for (;;) {
          if (!in.getline(line)) return false;
          if (in.line_no() == 1) strip_bom(line);  // (editors on Windows start files with one)
          std::string_view t = trim(line);
          if (t.empty() || t[0] == ';') continue;
          if (line[0] == '>') {
            take_header(in.line_no());
            resync = false;
            break;
          }
          if (resync) continue;
          fail_at(in.line_no(), "sequence data before the first FASTA header ('>')");
        }
      }
      rec.name = header_name;
      rec.line = header_line;
      rec.sequence.clear();
      have_header = false;
      while (in.getline(line)) {
        if (!line.empty() && line[0] == '>') {
          try {
            take_header(in.line_no());
          } catch (const MalformedRecord& e) {
            // (skip_malformed) The record read so far is whole: return it; the bad one's
            // sequence lines are dropped while looking for the next header.
            note_malformed(e.what());
          }
          break;
        }
        if (!line.empty() && line[0] == ';') continue;
        rec.sequence += line;
      }
      clean_sequence(rec.sequence, opt.strip_stop);
      if (rec.sequence.empty()) {
        ++skipped;
        if (opt.keep_empty) return true;
        if (!have_header && !resync) return false;  // (after a skipped header: not the end)
        continue;
      }
      return true;
    }
  }

  // ---- CSV (RFC 4180) and TSV: one parser, the delimiter differs ----
  const char* table_kind() const { return delim == '\t' ? "TSV" : "CSV"; }

  // Reads one record into `fields`; quoted fields may span lines. False at end of file.
  bool read_csv_record(uint64_t& start_line) {
    fields.clear();
    for (;;) {
      if (!in.getline(line)) return false;
      if (in.line_no() == 1) strip_bom(line);
      if (!line.empty()) break;  // blank lines between records are ignored
    }
    start_line = in.line_no();
    csv.delim = delim;
    csv.clear();
    csv.add_line(line);
    while (csv.in_quotes()) {
      if (!in.getline(line)) fail_at(start_line, std::string("unterminated quoted ") + table_kind() + " field");
      csv.add_line(line);
    }
    if (!csv.error().empty()) fail_at(start_line, csv.error());
    fields.swap(csv.fields);
    return true;
  }

  void read_csv_header() {
    uint64_t l = 0;
    if (!read_csv_record(l)) fail(in.path(), ": empty file (expected a ", table_kind(), " header row)");
    columns.clear();
    for (auto& f : fields) columns.emplace_back(trim(f));
    // An exact match, else the only one that differs in case (UniProt's TSV says "Sequence").
    auto find = [&](const std::string& name) -> long {
      long nocase = -1, n = 0;
      for (size_t c = 0; c < columns.size(); ++c) {
        if (columns[c] == name) return long(c);
        if (lower(columns[c]) == lower(name)) nocase = long(c), ++n;
      }
      return n == 1 ? nocase : -1;
    };
    auto missing = [&](const std::string& name) {
      std::string list;
      for (size_t c = 0; c < columns.size(); ++c) list += (c ? ", " : "") + ("'" + columns[c] + "'");
      fail(in.path(), ":", l, ": no column '", name, "' in the ", table_kind(), " header (columns: ", list, ")");
    };
    long s = find(opt.column);
    if (s < 0) missing(opt.column);
    seq_col = size_t(s);
    if (!opt.name_column.empty()) {
      name_col = find(opt.name_column);
      if (name_col < 0) missing(opt.name_column);
    }
  }

  bool next_csv(SequenceRecord& rec) {
    for (;;) {
      uint64_t start = 0;
      if (!read_csv_record(start)) return false;
      if (fields.size() != columns.size())
        fail_at(start, "expected " + std::to_string(columns.size()) + " fields (as in the header), found " +
                           std::to_string(fields.size()));
      rec.line = start;
      rec.sequence = std::move(fields[seq_col]);
      rec.name = name_col >= 0 ? std::string(trim(fields[size_t(name_col)])) : std::string();
      clean_sequence(rec.sequence, opt.strip_stop);
      if (rec.sequence.empty()) {
        ++skipped;
        if (opt.keep_empty) return true;
        continue;
      }
      return true;
    }
  }

  // ---- JSONL ----
  bool next_jsonl(SequenceRecord& rec) {
    for (;;) {
      if (!in.getline(line)) return false;
      if (in.line_no() == 1) strip_bom(line);
      if (trim(line).empty()) continue;
      uint64_t l = in.line_no();
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {  // (also out_of_range: a number like 1e400)
        fail_at(l, std::string("invalid JSON: ") + e.what());
      }
      if (!j.is_object()) fail_at(l, "expected a JSON object per line");
      auto it = j.find(opt.column);
      if (it == j.end()) {
        std::string fields;
        for (auto f = j.begin(); f != j.end(); ++f) fields += (fields.empty() ? "" : ", ") + f.key();
        fail_at(l, "no field '" + opt.column + "' (the record has: " + (fields.empty() ? "no fields" : fields) +
                       "); dataset.column / --column names the field that holds the sequence");
      }
      if (!it->is_string()) fail_at(l, "field '" + opt.column + "' is not a string");
      rec.line = l;
      rec.sequence = it->get<std::string>();
      rec.name.clear();
      if (!opt.name_column.empty()) {
        auto n = j.find(opt.name_column);
        if (n == j.end()) fail_at(l, "no field '" + opt.name_column + "'");
        rec.name = n->is_string() ? n->get<std::string>() : n->dump();
      }
      clean_sequence(rec.sequence, opt.strip_stop);
      if (rec.sequence.empty()) {
        ++skipped;
        if (opt.keep_empty) return true;
        continue;
      }
      return true;
    }
  }

  // ---- Parquet: one row per record (rec.line is the 1-based row); null sequences count as empty ----
  bool next_parquet(SequenceRecord& rec) {
    for (;;) {
      bool is_null = false;
      if (!parquet->next(rec.sequence, rec.name, is_null)) return false;
      rec.line = parquet->row();
      clean_sequence(rec.sequence, opt.strip_stop);
      if (rec.sequence.empty()) {
        ++skipped;
        if (opt.keep_empty) return true;
        continue;
      }
      return true;
    }
  }

  // ---- plain text: one sequence per line ----
  bool next_text(SequenceRecord& rec) {
    for (;;) {
      if (!in.getline(line)) return false;
      if (in.line_no() == 1) strip_bom(line);
      rec.line = in.line_no();
      rec.name.clear();
      rec.sequence = line;
      clean_sequence(rec.sequence, opt.strip_stop);
      if (rec.sequence.empty()) {
        ++skipped;
        if (opt.keep_empty) return true;
        continue;
      }
      return true;
    }
  }
};

SequenceReader::SequenceReader(const std::string& path, const ReaderOptions& options)
    : impl_(std::make_unique<Impl>(path, options)) {}
SequenceReader::~SequenceReader() = default;
SequenceReader::SequenceReader(SequenceReader&&) noexcept = default;
SequenceReader& SequenceReader::operator=(SequenceReader&&) noexcept = default;

bool SequenceReader::next(SequenceRecord& record) {
  Impl& m = *impl_;
  if (m.done) return false;
  if (m.opt.max_records && m.records >= m.opt.max_records) {
    m.done = true;
    return false;
  }
  bool ok = false;
  for (;;) {
    try {
      switch (m.format) {
        case SequenceFormat::Fasta: ok = m.next_fasta(record); break;
        case SequenceFormat::Csv:
        case SequenceFormat::Tsv: ok = m.next_csv(record); break;
        case SequenceFormat::Jsonl: ok = m.next_jsonl(record); break;
        case SequenceFormat::Text: ok = m.next_text(record); break;
        case SequenceFormat::Parquet: ok = m.next_parquet(record); break;
      }
      break;
    } catch (const MalformedRecord& e) {
      m.note_malformed(e.what());
    } catch (const Error& e) {
      // Anything else thrown while reading records is the stream itself (a truncated or
      // corrupt gzip/zstd member, an I/O error): with skip, the rest of the file is counted
      // as one skipped record and reading goes on with the next file.
      if (!m.opt.skip_malformed) throw;
      ++m.malformed;
      if (m.first_error.empty()) m.first_error = e.what();
      ok = false;
      break;
    }
  }
  if (ok) {
    ++m.records;
    return true;
  }
  m.done = true;
  if (m.records == (m.opt.keep_empty ? m.skipped : 0)) {  // (keep_empty: every record returned was empty)
    if (m.malformed)
      fail(m.in.path(), ": no usable sequences (", m.malformed, " malformed record(s) skipped; the first: ",
           m.first_error, ")");
    if (m.skipped)
      fail(m.in.path(), ": no sequences (", m.skipped, " record", m.skipped == 1 ? "" : "s",
           " with an empty sequence)");
    fail(m.in.path(), ": no sequences (empty ", format_name(m.format), " file)");
  }
  return false;
}

const std::string& SequenceReader::path() const { return impl_->in.path(); }
SequenceFormat SequenceReader::format() const { return impl_->format; }
uint64_t SequenceReader::records() const { return impl_->records; }
uint64_t SequenceReader::skipped_empty() const { return impl_->skipped; }
uint64_t SequenceReader::skipped_malformed() const { return impl_->malformed; }
const std::string& SequenceReader::first_error() const { return impl_->first_error; }
uint64_t SequenceReader::line() const { return impl_->in.line_no(); }

}  // namespace biofm
