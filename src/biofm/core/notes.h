// Notes: what the library reports without failing and without a caller to return it to (tensors
// a Hugging Face directory held that were not loaded, ...). note(text) prints "note: <text>" on
// stderr, one line, which is what the CLI shows; a NoteCapture collects this thread's notes
// instead for as long as it lives (the Python package turns them into BiofmWarnings). Captures
// nest: the innermost one on a thread gets the notes, and each restores the one it replaced.
// Notes from other threads are not captured (they go to their own thread's capture or stderr).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace biofm {

// "note: <text>\n" on stderr, or appended to this thread's innermost NoteCapture.
void note(std::string_view text);

class NoteCapture {
 public:
  NoteCapture();
  ~NoteCapture();
  NoteCapture(const NoteCapture&) = delete;
  NoteCapture& operator=(const NoteCapture&) = delete;
  // The notes so far (text without "note: "), in order; take() hands them over and clears them.
  const std::vector<std::string>& notes() const { return notes_; }
  std::vector<std::string> take();

 private:
  friend void note(std::string_view text);
  std::vector<std::string> notes_;
  NoteCapture* outer_;
};

}  // namespace biofm
