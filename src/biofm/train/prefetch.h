// Runs a BatchSource ahead of the trainer on a background thread, so tokenizing, masking
// and packing overlap with the step. Order and cursor semantics are those of the source:
// cursor() is the position after the last batch handed out, not after the prefetched ones.
#pragma once
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "biofm/data/batch_source.h"

namespace biofm {

class Prefetcher {
 public:
  Prefetcher(BatchSource& source, int depth);
  ~Prefetcher();
  Batch next();
  uint64_t cursor() const { return cursor_; }
  // Stops the worker, repositions the source, restarts.
  void set_cursor(uint64_t c);

 private:
  void start();
  void stop();
  void run();

  BatchSource& src_;
  const int depth_;
  uint64_t cursor_;
  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Batch, uint64_t>> queue_;  // batch, source cursor after it
  std::exception_ptr error_;
  bool stopping_ = false;
};

}  // namespace biofm
