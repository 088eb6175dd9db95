// Input specs: what `dataset.path`, `dataset.val_path` and `--input` accept, expanded into the
// files to read, in the order they are read.
//
//   a file          read as named (its extension picks the format unless one is given)
//   a directory     its regular files with a recognised extension (reader.h), sorted by name;
//                   not recursive; hidden files and subdirectories are ignored, other files are
//                   skipped and counted
//   a glob(3)       pattern with * ? [ ]: the matches sorted by name, each taken as if named
//                   (a matching directory is expanded as above); no match is an error
//   a list          comma-separated entries of the above, read in list order (so a file name
//                   that holds a comma cannot be given; use its directory or a glob)
//
// A path that exists is never taken as a pattern.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace biofm {

struct InputFiles {
  std::vector<std::string> files;  // in read order; a file listed twice is read twice
  uint64_t skipped = 0;            // directory entries skipped for an unrecognised extension
};

// The entries of a comma-separated list, trimmed; empty entries dropped.
std::vector<std::string> split_input_list(const std::string& spec);

// Throws naming the entry: an empty spec, a directory with no recognised file, a glob with no
// match. A named file is not checked here; the reader reports a missing one.
InputFiles expand_inputs(const std::string& spec);

}  // namespace biofm
