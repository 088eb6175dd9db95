// Streaming sequence readers: FASTA, CSV, TSV, JSONL and plain text, each plain, gzip or zstd.
//
// Files are read through LineReader (line_reader.h), which tells the compression from the
// first bytes, so "x.fasta", "x.fasta.gz" and "x.fasta.zst" go through the same code. Every
// error names the file and, where one applies, the line:
//   - missing/unreadable file, gzip/zstd corruption           → "<path>: ..."
//   - FASTA sequence data before the first header, a header with no name → "<path>:<line>: ..."
//   - CSV/TSV: missing column (lists the columns), wrong field count, unterminated quote, a quote
//     inside an unquoted field or text after a closing quote (data/csv_fields.h)
//   - JSONL: invalid JSON, not an object, missing or non-string field
//   - a file holding no record with a non-empty sequence     → "<path>: no sequences ..."
// Cleaning applied to every record: all whitespace inside the sequence is removed, and
// trailing '*' (a stop codon in protein FASTA) is dropped when strip_stop is on. Records
// whose sequence is then empty are skipped and counted (skipped_empty()).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace biofm {

enum class SequenceFormat { Fasta, Csv, Tsv, Jsonl, Text, Parquet };

const char* format_name(SequenceFormat f);  // "fasta", "csv", "tsv", "jsonl", "text", "parquet"
// "fasta" | "fa" | "csv" | "tsv" | "tab" | "jsonl" | "json" | "text" | "txt" (case-insensitive);
// throws otherwise.
SequenceFormat parse_format(std::string_view name);
// From the extension, after an optional ".gz" or ".zst": .fasta .fa .faa .fna .fas .ffn → Fasta,
// .csv → Csv, .tsv .tab → Tsv, .jsonl .json → Jsonl, .txt → Text, .parquet → Parquet (column by
// name, data/parquet_rows.h; not through LineReader, so no .gz/.zst around it); nullopt otherwise.
std::optional<SequenceFormat> format_from_extension(const std::string& path);
// The same, but throws naming the path when the extension is not one of those.
SequenceFormat detect_format(const std::string& path);

struct ReaderOptions {
  std::string format;               // "" or "auto": from the extension; else see parse_format
  // CSV/TSV column or JSONL field holding the sequence. A CSV/TSV header matches it exactly,
  // or else in another case if only one column does ("Sequence" in UniProt's TSV).
  std::string column = "sequence";
  std::string name_column;          // optional CSV/TSV column / JSONL field used as record name
  bool strip_stop = true;           // drop trailing '*' characters
  uint64_t max_records = 0;         // stop after this many records (0 = all)
  // dataset.on_error=skip: a malformed record (the errors above that name a line) is skipped
  // and counted instead of thrown; a read error of the stream (truncated or corrupt gzip/zstd)
  // ends the file, counted as one skipped record, and the records before it are kept.
  bool skip_malformed = false;
  // Return a record whose sequence is empty (still counted in skipped_empty()) instead of skipping
  // it, so that a command can write a row for every record of its input (score, eval's list). A
  // file of empty records only is still "no sequences".
  bool keep_empty = false;
};

struct SequenceRecord {
  std::string name;      // FASTA: the header's first word; CSV/TSV/JSONL: name_column, if given
  std::string sequence;  // cleaned (no whitespace, no trailing '*')
  uint64_t line = 0;     // 1-based line where the record starts
};

class SequenceReader {
 public:
  SequenceReader(const std::string& path, const ReaderOptions& options = {});
  ~SequenceReader();
  SequenceReader(SequenceReader&&) noexcept;
  SequenceReader& operator=(SequenceReader&&) noexcept;

  // Reads the next non-empty record (or empty one too, with keep_empty); false at the end of the
  // file. Throws on malformed input, and at the end if the file held no non-empty record at all.
  bool next(SequenceRecord& record);

  const std::string& path() const;
  SequenceFormat format() const;
  uint64_t records() const;        // records returned so far
  uint64_t skipped_empty() const;  // records skipped (keep_empty: returned) because their sequence was empty
  uint64_t skipped_malformed() const;     // with skip_malformed: records / file tails skipped
  const std::string& first_error() const;  // the first of them ("" when none)
  uint64_t line() const;           // lines consumed so far

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Removes whitespace in place; drops trailing '*' when strip_stop.
void clean_sequence(std::string& s, bool strip_stop);

}  // namespace biofm
