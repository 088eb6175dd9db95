// The tokenizers: ESM-2 (33 ids) and nucleotide bytes; encode, ids in range, decode.
#include "biofm/core/error.h"
#include "biofm/data/tokenizer.h"

namespace {

void check(const biofm::Tokenizer& tok, std::string_view s) {
  const std::vector<int32_t> ids = tok.encode(s);
  if (ids.size() < 2 || ids.front() != tok.begin_id() || ids.back() != tok.end_id()) std::abort();
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  (void)tok.decode(ids);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view s(reinterpret_cast<const char*>(data), size);
  static const biofm::EsmTokenizer esm;
  static const biofm::NucleotideTokenizer nt;
  try {
    check(esm, s);
  } catch (const biofm::Error&) {
  }
  try {
    check(nt, s);
  } catch (const biofm::Error&) {
  }
  return 0;
}
