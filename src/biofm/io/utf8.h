// UTF-8 checks for text that reaches JSON output (sequence names, metadata). nlohmann::json
// throws on invalid UTF-8 when dumping, so inputs are cleaned where they enter JSON.
#pragma once
#include <string>
#include <string_view>

namespace biofm {

bool is_valid_utf8(std::string_view s);
// `s` with every byte that does not start a valid UTF-8 sequence replaced by U+FFFD.
std::string to_valid_utf8(std::string_view s);

// Cleans names for JSON output and warns once on stderr ("<what>: N names ... replaced").
class Utf8Cleaner {
 public:
  explicit Utf8Cleaner(std::string what) : what_(std::move(what)) {}
  std::string operator()(std::string_view s);
  size_t replaced() const { return replaced_; }

 private:
  std::string what_;
  size_t replaced_ = 0;
};

}  // namespace biofm
