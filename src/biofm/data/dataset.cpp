#include "biofm/data/dataset.h"

#include <algorithm>

#include "biofm/core/error.h"

namespace biofm {

void SequenceDataset::add(std::string_view sequence, std::string_view name) {
  BIOFM_CHECK(!sequence.empty(), "SequenceDataset::add with an empty sequence");
  data_.append(sequence);
  offsets_.push_back(data_.size());
  names_.append(name);
  name_offsets_.push_back(names_.size());
  uint64_t n = sequence.size();
  stats_.min_length = stats_.records == 0 ? n : std::min(stats_.min_length, n);
  stats_.max_length = std::max(stats_.max_length, n);
  stats_.records += 1;
  stats_.bytes += n;
}

std::string_view SequenceDataset::name(uint64_t i) const {
  return std::string_view(names_.data() + name_offsets_[i], size_t(name_offsets_[i + 1] - name_offsets_[i]));
}

SequenceDataset SequenceDataset::load(const std::string& path, const ReaderOptions& options) {
  SequenceReader reader(path, options);
  SequenceDataset ds;
  SequenceRecord rec;
  while (reader.next(rec)) ds.add(rec.sequence, rec.name);
  ds.data_.shrink_to_fit();
  ds.names_.shrink_to_fit();
  ds.offsets_.shrink_to_fit();
  ds.name_offsets_.shrink_to_fit();
  ds.stats_.path = path;
  ds.stats_.format = format_name(reader.format());
  ds.stats_.skipped_empty = reader.skipped_empty();
  return ds;
}

SequenceDataset SequenceDataset::from_sequences(const std::vector<std::string>& sequences, bool strip_stop) {
  SequenceDataset ds;
  ds.stats_.format = "memory";
  std::string s;
  for (const auto& seq : sequences) {
    s = seq;
    clean_sequence(s, strip_stop);
    if (s.empty()) {
      ++ds.stats_.skipped_empty;
      continue;
    }
    ds.add(s);
  }
  return ds;
}

}  // namespace biofm
