#include "biofm/cli/args.h"

#include <algorithm>
#include <cmath>
#include <new>

#include "biofm/core/device_memory.h"
#include "biofm/core/error.h"

namespace biofm {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

Args::Args(int argc, char** argv, int first, const std::set<std::string>& value_flags,
           const std::set<std::string>& bool_flags, const std::string& command)
    : command_(command) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      positional_.push_back(a);
      continue;
    }
    std::string flag = a, value;
    bool inline_value = false;
    if (auto eq = a.find('='); eq != std::string::npos) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
      inline_value = true;
    }
    if (value_flags.count(flag)) {
      if (!inline_value) {
        if (i + 1 >= argc) fail("biofm ", command, ": ", flag, " needs a value");
        value = argv[++i];
      }
      values_[flag] = value;
    } else if (bool_flags.count(flag) && !inline_value) {
      bools_.insert(flag);
    } else {
      std::string best;
      size_t best_d = SIZE_MAX;
      for (const auto* set : {&value_flags, &bool_flags})
        for (const auto& f : *set)
          if (size_t d = edit_distance(flag, f); d < best_d) best_d = d, best = f;
      fail("biofm ", command, ": unknown option '", flag, "'", best.empty() ? "" : "; did you mean '" + best + "'?");
    }
  }
}

std::string Args::get(const std::string& flag, const std::string& fallback) const {
  auto it = values_.find(flag);
  return it == values_.end() ? fallback : it->second;
}

std::string Args::require(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) fail("biofm ", command_, ": missing required option ", flag);
  return it->second;
}

long long Args::get_int(const std::string& flag, long long fallback) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return fallback;
  try {
    size_t pos = 0;
    long long v = std::stoll(it->second, &pos);
    if (pos != it->second.size()) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    fail("biofm ", command_, ": ", flag, " expects an integer, got '", it->second, "'");
  }
}

long long Args::get_int(const std::string& flag, long long fallback, long long lo, long long hi) const {
  const long long v = get_int(flag, fallback);
  if (has(flag) && (v < lo || v > hi))
    fail("biofm ", command_, ": ", flag, " must lie in [", lo, ", ", hi, "], got ", v);
  return v;
}

double Args::get_double(const std::string& flag, double fallback, double lo, double hi) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return fallback;
  double v = 0;
  try {
    size_t pos = 0;
    v = std::stod(it->second, &pos);
    if (pos != it->second.size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    fail("biofm ", command_, ": ", flag, " expects a number, got '", it->second, "'");
  }
  if (!std::isfinite(v) || v < lo || v > hi)
    fail("biofm ", command_, ": ", flag, " must be a finite number in [", lo, ", ", hi, "], got '", it->second, "'");
  return v;
}

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::CPU;
  if (s == "cuda") {
    if (!cuda_available()) fail("--device cuda: no CUDA backend or GPU available");
    return Device::CUDA;
  }
  fail("--device must be cpu or cuda, got '", s, "'");
}

std::unique_ptr<LanguageModel> load_model(const ModelFamily& family, const std::string& dir, Device dev) {
  try {
    return family.load(dir, dev, BuildOptions{});
  } catch (const std::bad_alloc&) {
    fail(dir, ": not enough memory for this model (check the sizes in its config.json)");
  }
}

ReaderOptions reader_options(const Args& a) {
  ReaderOptions ro;
  ro.format = a.get("--format", "auto");
  ro.column = a.get("--column", "sequence");
  return ro;
}

}  // namespace biofm
