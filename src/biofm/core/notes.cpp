#include "biofm/core/notes.h"

#include <cstdio>
#include <utility>

namespace biofm {

namespace {
thread_local NoteCapture* innermost = nullptr;
}  // namespace

void note(std::string_view text) {
  if (innermost) {
    innermost->notes_.emplace_back(text);
    return;
  }
  // One write for the whole line (stderr is unbuffered), so lines of two threads do not mix.
  std::string line = "note: ";
  line.append(text).push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
}

NoteCapture::NoteCapture() : outer_(innermost) { innermost = this; }

// (Captures end in the reverse order of their making on a thread: they are scoped objects.)
NoteCapture::~NoteCapture() { innermost = outer_; }

std::vector<std::string> NoteCapture::take() { return std::exchange(notes_, {}); }

}  // namespace biofm
