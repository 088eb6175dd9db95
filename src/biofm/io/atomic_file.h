// Files and directories that appear whole or not at all.
#pragma once
#include <string>

namespace biofm {

// Writes `content` to path.tmp.<pid>, fsyncs, renames over path.
void write_file_atomic(const std::string& path, const std::string& content);
// Reads a whole file; throws naming the path if it cannot.
std::string read_file(const std::string& path);
// fsync a directory so that renames inside it are durable.
void fsync_dir(const std::string& dir);
// Creates a directory (and parents); throws with the path and reason if it cannot, or if the
// location is not writable.
void make_dirs_writable(const std::string& dir);

}  // namespace biofm
