// Content fingerprints for the identity of a resumable output (run_key.h): what a run read, not
// where it read it from. Not cryptographic: they tell runs apart, they do not defend against
// forgery.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace biofm::infer {

// A model directory (a Hugging Face directory or a biofm checkpoint): its config.json whole, and
// of each weight file the name, the size and 64 pieces of 4 KiB spread over it (the first and the
// last among them). Cheap for any model size; a model trained further, or another model of the
// same shape, differs in practically every piece.
uint64_t model_dir_fingerprint(const std::string& dir);

// An input's records, in order: every name and sequence whole.
class RecordsFingerprint {
 public:
  void add(std::string_view name, std::string_view sequence);
  uint64_t value() const;

 private:
  uint64_t h_ = 1469598103934665603ull;
  uint64_t records_ = 0;
};

}  // namespace biofm::infer
