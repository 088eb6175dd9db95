#include "biofm/infer/run_key.h"

#include <cstdio>
#include <filesystem>

#include "biofm/data/input_files.h"

namespace biofm::infer {

namespace fs = std::filesystem;

std::string RunKey::normal_path(const std::string& p) {
  if (p.empty()) return p;
  // (absolute first: weakly_canonical leaves a relative path none of whose parts exist relative)
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec);
  if (ec) return p;
  fs::path n = fs::weakly_canonical(abs, ec);
  if (ec) n = abs.lexically_normal();  // (an unreadable directory on the way)
  // (a path that does not exist keeps a trailing '/' through weakly_canonical)
  if (n.filename().empty() && n != n.root_path()) n = n.parent_path();
  return n.string();
}

std::string RunKey::normal_path_list(const std::string& list) {
  std::string out;
  for (const std::string& e : split_input_list(list)) {
    if (!out.empty()) out += ',';
    out += normal_path(e);
  }
  return out;
}

std::string RunKey::str() const {
  std::string s = command_;
  for (const Field& f : fields_) s += " " + f.name + "=" + f.value;
  return s;
}

std::string RunKey::hex(uint64_t v) {
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", (unsigned long long)v);
  return out;
}

bool RunKey::Field::matches(const std::string& stored) const {
  switch (kind) {
    case Kind::Text:
      return stored == value;
    case Kind::Path:
      return normal_path(stored) == value;
    case Kind::PathList:
      return normal_path_list(stored) == value;
    case Kind::Content:
    case Kind::ContentList: {
      const size_t ours = value.rfind('#'), theirs = stored.rfind('#');
      const bool fingerprinted = theirs != std::string::npos && stored.size() - theirs == 17 &&
                                 stored.find_first_not_of("0123456789abcdef", theirs + 1) == std::string::npos;
      if (fingerprinted) return stored.compare(theirs, std::string::npos, value, ours) == 0;
      // (a key of an older version: the path alone)
      const std::string path = value.substr(0, ours);
      return (kind == Kind::Content ? normal_path(stored) : normal_path_list(stored)) == path;
    }
  }
  return false;
}

bool RunKey::matches(const std::string& stored) const {
  if (stored == str()) return true;
  // Read the stored key with this key's fields, in order: each value runs up to the next
  // field's " name=" (the last one to the end).
  if (stored.compare(0, command_.size(), command_) != 0) return false;
  size_t at = command_.size();
  for (size_t i = 0; i < fields_.size(); ++i) {
    const std::string head = " " + fields_[i].name + "=";
    if (stored.compare(at, head.size(), head) != 0) return false;
    at += head.size();
    const size_t end = i + 1 < fields_.size() ? stored.find(" " + fields_[i + 1].name + "=", at) : stored.size();
    if (end == std::string::npos || !fields_[i].matches(stored.substr(at, end - at))) return false;
    at = end;
  }
  return at == stored.size();
}

}  // namespace biofm::infer
