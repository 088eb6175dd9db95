// Sequence readers: FASTA, CSV, TSV, JSONL and text (the first byte picks the format and the
// name column; the rest is the file, so gzip/zstd magic reaches the decompressors too), then
// the names as they reach JSON output (biofm embed/eval).
#include <nlohmann/json.hpp>

#include "biofm/core/error.h"
#include "biofm/data/dataset.h"
#include "biofm/io/utf8.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const char* kSuffix[] = {".fasta", ".csv", ".jsonl", ".txt", ".tsv"};
  const int fmt = (data[0] & 3) == 1 && (data[0] & 16) ? 4 : data[0] & 3;  // bit 4: csv -> tsv
  biofm::ReaderOptions ro;
  if (data[0] & 4) ro.name_column = "name";
  ro.strip_stop = data[0] & 8;
  const std::string path = biofm::fuzz::write_temp(data + 1, size - 1, kSuffix[fmt]);
  try {
    biofm::SequenceDataset d = biofm::SequenceDataset::load(path, ro);
    nlohmann::json names = nlohmann::json::array();
    biofm::Utf8Cleaner clean("fuzz");
    for (uint64_t i = 0; i < d.size(); ++i) {
      if (d.length(i) == 0) std::abort();  // empty records are skipped, never held
      names.push_back(clean(d.name(i)));
    }
    (void)names.dump();  // throws (a crash) if a name were not valid UTF-8
  } catch (const biofm::Error&) {
  }
  return 0;
}
