#include "biofm/data/dataset.h"

#include <algorithm>

#include "biofm/core/error.h"
#include "biofm/data/input_files.h"

namespace biofm {

void SequenceDataset::add(std::string_view sequence, std::string_view name, bool may_be_empty) {
  BIOFM_CHECK(may_be_empty || !sequence.empty(), "SequenceDataset::add with an empty sequence");
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

SequenceDataset SequenceDataset::load(const std::string& spec, const ReaderOptions& options) {
  const InputFiles inputs = expand_inputs(spec);
  SequenceDataset ds;
  std::vector<std::string> formats;
  SequenceRecord rec;
  for (const auto& file : inputs.files) {
    ReaderOptions o = options;
    if (options.max_records) {
      if (ds.size() >= options.max_records) break;
      o.max_records = options.max_records - ds.size();
    }
    SequenceReader reader(file, o);
    while (reader.next(rec)) ds.add(rec.sequence, rec.name, options.keep_empty);
    ds.stats_.skipped_empty += reader.skipped_empty();
    ds.stats_.skipped_malformed += reader.skipped_malformed();
    if (ds.stats_.first_error.empty()) ds.stats_.first_error = reader.first_error();
    ds.stats_.files += 1;
    const std::string f = format_name(reader.format());
    if (std::find(formats.begin(), formats.end(), f) == formats.end()) formats.push_back(f);
  }
  ds.data_.shrink_to_fit();
  ds.names_.shrink_to_fit();
  ds.offsets_.shrink_to_fit();
  ds.name_offsets_.shrink_to_fit();
  ds.stats_.path = spec;
  for (size_t i = 0; i < formats.size(); ++i) ds.stats_.format += (i ? "+" : "") + formats[i];
  ds.stats_.skipped_files = inputs.skipped;
  return ds;
}

std::string DatasetStats::summary() const {
  std::string s = std::to_string(records) + (records == 1 ? " sequence" : " sequences");
  if (files > 1 || skipped_files > 0) s += " from " + std::to_string(files) + (files == 1 ? " file" : " files");
  if (skipped_files > 0) s += " (" + std::to_string(skipped_files) + " skipped: unknown extension)";
  if (skipped_malformed > 0)
    s += "; " + std::to_string(skipped_malformed) + " malformed record(s) skipped (dataset.on_error=skip), the first: " +
         first_error;
  return s;
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
