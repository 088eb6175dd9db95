// The fields of CSV (RFC 4180) and TSV records, one line at a time: a quoted field ("a,b"; ""
// inside quotes is a quote) may span lines; blanks around a quoted field are kept. A quote
// anywhere but at the start of a field, or text after a quoted field's closing quote, breaks the
// format: the record is malformed (error()), and what was read is kept literally. The sequence
// reader (reader.cpp) and score's mutations tables (infer/scoring.cpp) parse with it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace biofm {

struct CsvFields {
  char delim = ',';
  std::vector<std::string> fields;  // the record's fields so far (all of them once complete)

  void clear() {
    fields.clear();
    field_.clear();
    quoted_ = closed_ = false;
    error_.clear();
  }
  // Scans one line of the record. At its end the record is complete, unless a quoted field is
  // still open (in_quotes()): then the field goes on with a newline and the next line.
  void add_line(std::string_view line) {
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted_) {
        if (c != '"') field_ += c;
        else if (i + 1 < line.size() && line[i + 1] == '"') field_ += '"', ++i;
        else quoted_ = false, closed_ = true;
      } else if (c == delim) {
        end_field();
      } else if (c == '"' && !closed_ && blank(field_)) {
        quoted_ = true;
      } else {
        if (closed_ && c != ' ' && c != '\t') malformed("text after the closing quote of");
        else if (c == '"') malformed("a '\"' inside unquoted");
        field_ += c;
      }
    }
    if (quoted_) field_ += '\n';
    else end_field();
  }
  bool in_quotes() const { return quoted_; }
  // The record's first break of the format ("" when none), naming the field: "a '"' inside
  // unquoted field 2 (RFC 4180: ...)" or "text after the closing quote of field 2 (...)".
  const std::string& error() const { return error_; }

 private:
  static bool blank(std::string_view s) { return s.find_first_not_of(" \t") == std::string_view::npos; }
  void end_field() {
    fields.push_back(std::move(field_));
    field_.clear();
    closed_ = false;
  }
  void malformed(const char* what) {
    if (error_.empty())
      error_ = std::string(what) + " field " + std::to_string(fields.size() + 1) +
               " (RFC 4180: a field holding a '\"' is quoted whole, each '\"' inside doubled: \"se\"\"q\")";
  }

  std::string field_, error_;
  bool quoted_ = false, closed_ = false;  // closed_: the field's closing quote was read
};

}  // namespace biofm
