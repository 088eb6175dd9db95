#include "biofm/core/range_timer.h"

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

namespace biofm::range_timer {

namespace {

using Clock = std::chrono::steady_clock;

// Spans kept per window at most (two events each on the GPU): a window of a few steps holds a few
// thousand; one left open for a whole run stops growing here, with a warning.
constexpr size_t kMaxSpans = size_t(1) << 20;

struct Mark {
  void* event = nullptr;  // GPU marks
  Clock::time_point time;
};

struct Span {
  int name = 0;
  Mark start, end;
  bool closed = false;
};

struct State {
  std::mutex m;
  bool enabled = false, gpu = false, window = false, overflow_warned = false;
  std::atomic<bool> recording{false};  // (read unlocked on every range's start)
  std::vector<std::string> names;
  std::map<std::string, int> ids;
  std::vector<Span> spans;
  std::vector<void*> free_events;  // taken spans' events, recorded again by later marks
};

State& state() {
  static State s;
  return s;
}

// (under the lock)
Mark mark(State& s, void* stream) {
  Mark k;
  if (s.gpu) {
    if (s.free_events.empty()) {
      k.event = detail::create_event();
    } else {
      k.event = s.free_events.back();
      s.free_events.pop_back();
    }
    detail::record_event(k.event, stream);
  } else {
    k.time = Clock::now();
  }
  return k;
}

// "layer 12 backward" -> "layer * backward": the first run of digits becomes '*'.
std::string pattern_of(const std::string& name) {
  std::string out;
  bool replaced = false;
  for (size_t i = 0; i < name.size();) {
    if (!replaced && std::isdigit(static_cast<unsigned char>(name[i]))) {
      while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
      out += '*';
      replaced = true;
    } else {
      out += name[i++];
    }
  }
  return out;
}

// (under the lock) Forgets the recorded spans, keeping their events for reuse.
void forget(State& s) {
  for (const Span& sp : s.spans)
    for (void* e : {sp.start.event, sp.end.event})
      if (e) s.free_events.push_back(e);
  s.spans.clear();
  s.names.clear();
  s.ids.clear();
}

}  // namespace

void set_enabled(bool on, bool gpu) {
  State& s = state();
  std::lock_guard lock(s.m);
  forget(s);
  s.enabled = on;
  s.gpu = gpu;
  s.window = false;
  s.recording = false;
}

void set_window(bool open) {
  State& s = state();
  std::lock_guard lock(s.m);
  s.window = open && s.enabled;
  if (!s.window) s.recording = false;
}

void set_recording(bool on) {
  State& s = state();
  std::lock_guard lock(s.m);
  s.recording = on && s.window;
}

bool recording() { return state().recording.load(std::memory_order_relaxed); }

int begin(const char* name, void* stream) {
  State& s = state();
  if (!s.recording) return -1;
  std::lock_guard lock(s.m);
  if (!s.recording) return -1;
  if (s.spans.size() >= kMaxSpans) {
    if (!s.overflow_warned)
      std::fprintf(stderr, "warning: profiler.range_times: %zu ranges in this window; later ones are not timed "
                           "(shorten profiler.start_step..end_step)\n", kMaxSpans);
    s.overflow_warned = true;
    return -1;
  }
  auto [it, added] = s.ids.try_emplace(name, int(s.names.size()));
  if (added) s.names.emplace_back(name);
  Span sp;
  sp.name = it->second;
  sp.start = mark(s, stream);
  s.spans.push_back(sp);
  return int(s.spans.size() - 1);
}

void end(int id, void* stream) {
  if (id < 0) return;
  State& s = state();
  std::lock_guard lock(s.m);
  if (size_t(id) >= s.spans.size()) return;  // (taken meanwhile: a range that outlived its window)
  s.spans[size_t(id)].end = mark(s, stream);
  s.spans[size_t(id)].closed = true;
}

bool pending() {
  State& s = state();
  std::lock_guard lock(s.m);
  if (s.window || s.spans.empty()) return false;
  for (const Span& sp : s.spans)
    if (!sp.closed) return false;
  return true;
}

std::vector<Row> take() {
  State& s = state();
  std::lock_guard lock(s.m);
  std::vector<Row> rows(s.names.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i].name = s.names[i];
  for (const Span& sp : s.spans) {
    if (sp.closed) {
      // (by the marks themselves: the timer may have been switched off or over since)
      const double ms = sp.start.event && sp.end.event
                            ? double(detail::elapsed_ms(sp.start.event, sp.end.event))
                            : std::chrono::duration<double, std::milli>(sp.end.time - sp.start.time).count();
      rows[size_t(sp.name)].calls += 1;
      rows[size_t(sp.name)].total_ms += ms;
    }
  }
  forget(s);
  std::vector<Row> seen;
  for (Row& r : rows)
    if (r.calls > 0) seen.push_back(std::move(r));
  return seen;
}

std::vector<Group> fold(const std::vector<Row>& rows) {
  std::vector<Group> groups;
  std::map<std::string, size_t> at;
  for (const Row& r : rows) {
    const std::string key = pattern_of(r.name);
    auto [it, added] = at.try_emplace(key, groups.size());
    if (added) {
      Group g;
      g.name = key;
      g.least_ms = 1e300;
      groups.push_back(g);
    }
    Group& g = groups[it->second];
    g.calls += r.calls;
    g.total_ms += r.total_ms;
    g.members += 1;
    if (r.total_ms < g.least_ms) g.least_ms = r.total_ms, g.least = r.name;
    if (r.total_ms > g.most_ms) g.most_ms = r.total_ms, g.most = r.name;
  }
  return groups;
}

std::string format_table(const std::vector<Row>& rows, int64_t steps, const std::string& title) {
  const double n = double(std::max<int64_t>(steps, 1));
  std::string out = title + "\n";
  char line[320];
  std::snprintf(line, sizeof line, "  %-34s %9s %11s %11s\n", "range", "calls", "ms/step", "ms/call");
  out += line;
  for (const Group& g : fold(rows)) {
    std::snprintf(line, sizeof line, "  %-34s %9.1f %11.3f %11.4f", g.name.c_str(), double(g.calls) / n,
                  g.total_ms / n, g.total_ms / double(std::max<int64_t>(g.calls, 1)));
    out += line;
    if (g.members > 1) {
      std::snprintf(line, sizeof line, "   (%d names: least %s %.3f, most %s %.3f ms/step)", g.members,
                    g.least.c_str(), g.least_ms / n, g.most.c_str(), g.most_ms / n);
      out += line;
    }
    out += "\n";
  }
  return out;
}

std::string to_json(const std::vector<Row>& rows, int64_t first_step, int64_t last_step, int rank, bool gpu) {
  nlohmann::json j = {{"first_step", first_step},
                      {"last_step", last_step},
                      {"rank", rank},
                      {"clock", gpu ? "cuda events (stream time)" : "steady clock"},
                      {"ranges", nlohmann::json::array()}};
  for (const Row& r : rows)
    j["ranges"].push_back({{"name", r.name}, {"calls", r.calls}, {"total_ms", r.total_ms}});
  return j.dump(1) + "\n";
}

}  // namespace biofm::range_timer
