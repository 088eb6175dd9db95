// CPU-only build: no side stream; scopes do nothing.
#include "biofm/core/side_stream.h"

namespace biofm::side_stream {

Scope::Scope(bool) {}
Scope::~Scope() = default;
void Scope::enter() {}
void Scope::hold(const Tensor&) {}
void join() {}
bool pending() { return false; }
void set_delays_for_tests(int, int) {}

}  // namespace biofm::side_stream
