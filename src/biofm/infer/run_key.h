// What makes two runs' outputs interchangeable: the command and its options as "name=value"
// fields ("embed model=DIR input=FILE layers=[-1] ..."), stored with the output (every shard,
// progress.json) and compared when the same command runs again. Path values are made absolute
// and normal (std::filesystem::weakly_canonical), so neither how a path is spelled
// (esm_run/final_model, ./esm_run/final_model/) nor the working directory matters.
#pragma once
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
  // Any other field, as operator<< writes it.
  template <class T>
  RunKey& add(const std::string& name, const T& value) {
    std::ostringstream s;
    s << value;
    return field(name, s.str(), Kind::Text);
  }

  std::string str() const;
  // Whether a stored key is this run's: the same text, or (a key written before paths were
  // normalized) the same once its path fields are normalized here, relative paths against the
  // current directory.
  bool matches(const std::string& stored) const;

  static std::string normal_path(const std::string& p);
  static std::string normal_path_list(const std::string& list);

 private:
  enum class Kind { Text, Path, PathList };
  struct Field {
    std::string name, value;
    Kind kind;
  };
  RunKey& field(const std::string& name, std::string value, Kind kind) {
    fields_.push_back({name, std::move(value), kind});
    return *this;
  }
  std::string command_;
  std::vector<Field> fields_;
};

}  // namespace biofm::infer
