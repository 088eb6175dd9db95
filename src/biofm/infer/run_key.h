// What makes two runs' outputs interchangeable: the command and its options as "name=value"
// fields ("embed model=DIR#<fingerprint> input=FILE#<fingerprint> layers=[-1] ..."), stored with
// the output (every shard, progress.json) and compared when the same command runs again.
// The model and the input are compared by content (fingerprint.h): the same model or input
// moved, copied or mounted elsewhere is the same run, and another model written over the same
// directory is not. Their paths are kept beside the fingerprints for people to read, absolute
// and normal (std::filesystem::weakly_canonical). Keys of older versions (paths only, as spelled
// or normalized) still match by path.
#pragma once
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace biofm::infer {

class RunKey {
 public:
  explicit RunKey(std::string command) : command_(std::move(command)) {}
  // A path field: one path (a model directory).
  RunKey& path(const std::string& name, const std::string& value) { return field(name, normal_path(value), Kind::Path); }
  // A path field holding a comma-separated list of inputs (data/input_files.h: files,
  // directories, globs).
  RunKey& paths(const std::string& name, const std::string& value) {
    return field(name, normal_path_list(value), Kind::PathList);
  }
  // A field that names content: its path (or comma-separated list of inputs) for people, and a
  // fingerprint of the content, which is what matching compares ("PATH#0123456789abcdef").
  RunKey& content(const std::string& name, const std::string& path, uint64_t fingerprint) {
    return field(name, normal_path(path) + "#" + hex(fingerprint), Kind::Content);
  }
  RunKey& content_list(const std::string& name, const std::string& list, uint64_t fingerprint) {
    return field(name, normal_path_list(list) + "#" + hex(fingerprint), Kind::ContentList);
  }
  // Any other field, as operator<< writes it.
  template <class T>
  RunKey& add(const std::string& name, const T& value) {
    std::ostringstream s;
    s << value;
    return field(name, s.str(), Kind::Text);
  }

  std::string str() const;
  // Whether a stored key is this run's: field by field the same text, content fields the same
  // fingerprint (or, in a key written before fingerprints, the same path), path fields the same
  // once normalized here (relative paths against the current directory).
  bool matches(const std::string& stored) const;

  static std::string normal_path(const std::string& p);
  static std::string normal_path_list(const std::string& list);
  static std::string hex(uint64_t v);

 private:
  enum class Kind { Text, Path, PathList, Content, ContentList };
  struct Field {
    std::string name, value;
    Kind kind;
    bool matches(const std::string& stored_value) const;
  };
  RunKey& field(const std::string& name, std::string value, Kind kind) {
    fields_.push_back({name, std::move(value), kind});
    return *this;
  }
  std::string command_;
  std::vector<Field> fields_;
};

}  // namespace biofm::infer
