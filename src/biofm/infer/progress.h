// The progress line of the inference commands on stderr: records and tokens done, their rates
// and the time left, at most once every 2 seconds.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace biofm::infer {

class Progress {
 public:
  // enabled false: silent (the counters still count).
  Progress(std::string what, int64_t total_records, int64_t total_tokens, bool enabled);
  // records / tokens finished since the last call (tokens: as fed to the model).
  void add(int64_t records, int64_t tokens);
  // Records already done before this run started (a resumed run): counted, not timed.
  void skip(int64_t records, int64_t tokens);
  // The final line (only when a progress line was printed before).
  void finish();
  // "embed: 1200/4000 records (30%), 312 records/s, 131k tokens/s, ETA 9s".
  std::string line() const;
  int64_t records() const { return done_records_; }
  int64_t tokens() const { return done_tokens_; }
  double seconds() const;

 private:
  std::string what_;
  int64_t total_records_, total_tokens_;
  bool enabled_, printed_ = false;
  int64_t done_records_ = 0, done_tokens_ = 0, skipped_records_ = 0, skipped_tokens_ = 0;
  std::chrono::steady_clock::time_point start_, last_print_;
};

// Whether stderr is a terminal (the default for the progress line; --progress forces it).
bool stderr_is_terminal();

}  // namespace biofm::infer
