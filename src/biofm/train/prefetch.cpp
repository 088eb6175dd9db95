#include "biofm/train/prefetch.h"

namespace biofm {

Prefetcher::Prefetcher(BatchSource& source, int depth) : src_(source), depth_(depth), cursor_(source.cursor()) {
  start();
}

Prefetcher::~Prefetcher() { stop(); }

void Prefetcher::start() {
  stopping_ = false;
  worker_ = std::thread([this] { run(); });
}

void Prefetcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  queue_.clear();
}

void Prefetcher::run() {
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || int(queue_.size()) < depth_; });
        if (stopping_) return;
      }
      Batch b = src_.next();  // the worker is the only user of src_ while running
      const uint64_t after = src_.cursor();
      {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.emplace_back(std::move(b), after);
      }
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
    cv_.notify_all();
  }
}

Batch Prefetcher::next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || error_; });
  if (queue_.empty() && error_) std::rethrow_exception(error_);
  auto [b, after] = std::move(queue_.front());
  queue_.pop_front();
  cursor_ = after;
  lock.unlock();
  cv_.notify_all();
  return b;
}

void Prefetcher::set_cursor(uint64_t c) {
  stop();
  src_.set_cursor(c);
  cursor_ = c;
  error_ = nullptr;
  start();
}

}  // namespace biofm
