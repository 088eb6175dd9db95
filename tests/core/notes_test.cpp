// core/notes: a note goes to stderr as one "note: ..." line unless a NoteCapture lives on the
// same thread; captures nest (the innermost collects, and each restores the one it replaced) and
// belong to their thread only.
#include "biofm/core/notes.h"

#include <gtest/gtest.h>

#include <thread>

using namespace biofm;

using Notes = std::vector<std::string>;

TEST(CoreNotes, StderrByDefault) {
  testing::internal::CaptureStderr();
  note("dir: kept 2 contact-head tensors");
  note("");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "note: dir: kept 2 contact-head tensors\nnote: \n");
}

TEST(CoreNotes, CaptureCollectsThisThreadsNotesAndNestsAndRestores) {
  testing::internal::CaptureStderr();
  {
    NoteCapture outer;
    note("one");
    {
      NoteCapture inner;
      note("two");
      EXPECT_EQ(inner.notes(), Notes{"two"});
      EXPECT_EQ(outer.notes(), Notes{"one"}) << "only the innermost capture collects";
      // Another thread's notes are not this thread's capture's: they go to stderr.
      std::thread([] { note("from another thread"); }).join();
      EXPECT_EQ(inner.take(), Notes{"two"});
      EXPECT_TRUE(inner.notes().empty()) << "take() clears";
      note("three");
      EXPECT_EQ(inner.notes(), Notes{"three"});
    }
    note("four");
    EXPECT_EQ(outer.notes(), (Notes{"one", "four"})) << "the inner capture's end restores the outer one";
  }
  note("five");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "note: from another thread\nnote: five\n")
      << "the last capture's end restores stderr";
}
