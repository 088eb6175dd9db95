// The fields of CSV (RFC 4180) and TSV records, one line at a time: a quoted field ("a,b"; ""
// inside quotes is a quote) may span lines. The sequence reader (reader.cpp) and score's
// mutations tables (infer/scoring.cpp) parse with it.
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
    quoted_ = false;
  }
  // Scans one line of the record. At its end the record is complete, unless a quoted field is
  // still open (in_quotes()): then the field goes on with a newline and the next line.
  void add_line(std::string_view line) {
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted_) {
        if (c != '"') field_ += c;
        else if (i + 1 < line.size() && line[i + 1] == '"') field_ += '"', ++i;
        else quoted_ = false;
      } else if (c == delim) {
        fields.push_back(std::move(field_));
        field_.clear();
      } else if (c == '"') {
        quoted_ = true;
      } else {
        field_ += c;
      }
    }
    if (quoted_) {
      field_ += '\n';
    } else {
      fields.push_back(std::move(field_));
      field_.clear();
    }
  }
  bool in_quotes() const { return quoted_; }

 private:
  std::string field_;
  bool quoted_ = false;
};

}  // namespace biofm
