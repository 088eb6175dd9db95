#include "biofm/infer/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace biofm::infer {

namespace {

std::string rate(double v) {
  char buf[32];
  if (v >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  else if (v >= 1e4) std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string duration(double s) {
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%dh%02dm", int(s / 3600), int(s / 60) % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%dm%02ds", int(s / 60), int(s) % 60);
  else std::snprintf(buf, sizeof buf, "%ds", int(s + 0.5));
  return buf;
}

}  // namespace

bool stderr_is_terminal() { return isatty(STDERR_FILENO) != 0; }

Progress::Progress(std::string what, int64_t total_records, int64_t total_tokens, bool enabled)
    : what_(std::move(what)), total_records_(total_records), total_tokens_(total_tokens), enabled_(enabled),
      start_(std::chrono::steady_clock::now()), last_print_(start_) {}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::skip(int64_t records, int64_t tokens) {
  done_records_ += records;
  done_tokens_ += tokens;
  skipped_records_ += records;
  skipped_tokens_ += tokens;
}

void Progress::add(int64_t records, int64_t tokens) {
  done_records_ += records;
  done_tokens_ += tokens;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_print_ < std::chrono::seconds(2)) return;
  last_print_ = now;
  printed_ = true;
  std::fprintf(stderr, "%s\n", line().c_str());
}

void Progress::finish() {
  if (printed_) std::fprintf(stderr, "%s\n", line().c_str());
}

std::string Progress::line() const {
  const double s = std::max(seconds(), 1e-9);
  const double rec_rate = double(done_records_ - skipped_records_) / s;
  const double tok_rate = double(done_tokens_ - skipped_tokens_) / s;
  std::ostringstream os;
  os << what_ << ": " << done_records_ << "/" << total_records_ << " records";
  if (total_records_ > 0) os << " (" << int(100.0 * double(done_records_) / double(total_records_)) << "%)";
  os << ", " << rate(rec_rate) << " records/s, " << rate(tok_rate) << " tokens/s";
  if (done_records_ < total_records_) {
    // Time left from the token rate (records differ in length; tokens measure the work).
    const double left_tokens = double(std::max<int64_t>(0, total_tokens_ - done_tokens_));
    if (tok_rate > 0) os << ", ETA " << duration(left_tokens / tok_rate);
  } else {
    os << ", done in " << duration(s);
  }
  return os.str();
}

}  // namespace biofm::infer
