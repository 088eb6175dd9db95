#include "biofm/dist/coordinator_impl.h"

#include <algorithm>
#include <cstdio>

#include "biofm/core/error.h"

namespace biofm::coord {

std::string seconds_text(Clock::duration d) {
  const double s = std::chrono::duration<double>(d).count();
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.1f" : "%.0f", s);
  return buf;
}

uint64_t Mailbox::new_request_id() {
  std::lock_guard lock(m_);
  return next_id_++;
}

bool Mailbox::deliver(const Frame& f) {
  std::unique_lock lock(m_);
  if (f.type == Msg::value) {
    PayloadReader r(f.payload);
    const uint64_t id = r.u64();
    values_[id] = r.str();
  } else if (f.type == Msg::gathered) {
    gathered_.push_back(parse_gathered(f.payload));
  } else if (f.type == Msg::bye_ack) {
    finish_problem_ = "";
  } else {
    return false;
  }
  lock.unlock();
  cv_.notify_all();
  return true;
}

void Mailbox::finished(std::string problem) {
  {
    std::lock_guard lock(m_);
    finish_problem_ = std::move(problem);
  }
  cv_.notify_all();
}

void Mailbox::fail(const std::string& message) {
  {
    std::lock_guard lock(m_);
    if (!failure_) failure_ = message;
  }
  cv_.notify_all();
}

std::optional<std::string> Mailbox::failure() const {
  std::lock_guard lock(m_);
  return failure_;
}

std::string Mailbox::wait_value(uint64_t id, const std::string& key, int rank, Clock::time_point deadline) {
  std::unique_lock lock(m_);
  const auto start = Clock::now();
  cv_.wait_until(lock, deadline, [&] { return failure_ || values_.count(id); });
  if (failure_) biofm::fail(*failure_);
  const auto it = values_.find(id);
  if (it == values_.end())
    biofm::fail("coordinator: rank ", rank, " waited ", seconds_text(Clock::now() - start), " s for key '", key,
         "', which no rank has set");
  std::string value = std::move(it->second);
  values_.erase(it);
  return value;
}

std::vector<std::string> Mailbox::wait_gathered() {
  std::unique_lock lock(m_);
  cv_.wait(lock, [&] { return failure_ || !gathered_.empty(); });
  if (failure_) biofm::fail(*failure_);
  std::vector<std::string> all = std::move(gathered_.front());
  gathered_.pop_front();
  return all;
}

bool Mailbox::wait_finished(Clock::time_point deadline, std::string& problem) {
  std::unique_lock lock(m_);
  cv_.wait_until(lock, deadline, [&] { return failure_ || finish_problem_; });
  if (failure_ || !finish_problem_) return false;
  problem = *finish_problem_;
  return true;
}

void StepClock::set(int64_t step, int phase) {
  std::lock_guard lock(m_);
  if (step == step_ && phase == phase_) return;  // the same again: its clock keeps running
  const auto now = Clock::now();
  if (step_ >= 0 && phase_ == 0) {
    recent_.push_back(now - since_);
    if (recent_.size() > 20) recent_.pop_front();
  }
  step_ = step;
  phase_ = phase;
  since_ = now;
}

StepClock::Reading StepClock::now() const {
  std::lock_guard lock(m_);
  return {step_, step_ < 0 ? Clock::duration::zero() : Clock::now() - since_, phase_};
}

Clock::duration StepClock::longest_recent() const {
  std::lock_guard lock(m_);
  Clock::duration longest{};
  for (Clock::duration d : recent_) longest = std::max(longest, d);
  return longest;
}

}  // namespace biofm::coord

namespace biofm {

void Coordinator::Impl::report_failure(const std::string& message) {
  if (failure_reported_.exchange(true)) return;
  on_failure_(message);
  mailbox.fail(message);
}

}  // namespace biofm
