// Errors: one exception type whose message says what went wrong and where.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace biofm {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
}  // namespace detail

// fail("bad value ", x, " for key ", k): throws biofm::Error with the pieces joined.
template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  throw Error(os.str());
}

}  // namespace biofm

// BIOFM_CHECK(cond, message pieces...): an internal invariant or argument check.
#define BIOFM_CHECK(cond, ...)                                                            \
  do {                                                                                    \
    if (!(cond)) ::biofm::fail(__FILE__, ":", __LINE__, ": check failed: " #cond ": ", \
                               ##__VA_ARGS__);                                            \
  } while (0)
