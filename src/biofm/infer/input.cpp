#include "biofm/infer/input.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "biofm/core/error.h"
#include "biofm/core/hash.h"
#include "biofm/core/notes.h"
#include "biofm/data/input_files.h"
#include "biofm/data/prepared.h"

namespace biofm::infer {

struct InputStream::Files {
  std::string spec;
  ReaderOptions options;
  InputFiles inputs;
  size_t next_file = 0;                    // the file to open after the current one
  std::unique_ptr<SequenceReader> reader;  // the current file (null between files / at the end)
  std::vector<std::string> formats;
};

struct InputStream::Prepared {
  std::unique_ptr<PreparedCorpus> corpus;
  const Tokenizer* tok = nullptr;
  std::string split, chars;  // chars: prepared_residue_chars(tok)
  std::vector<int32_t> ids;
  std::string seq;
};

InputStream::~InputStream() = default;
InputStream::InputStream(InputStream&&) noexcept = default;
InputStream& InputStream::operator=(InputStream&&) noexcept = default;

InputStream InputStream::files(const std::string& spec, const ReaderOptions& options) {
  InputStream s;
  s.files_ = std::make_unique<Files>();
  s.files_->spec = spec;
  s.files_->options = options;
  s.files_->inputs = expand_inputs(spec);
  s.rewind();
  return s;
}

InputStream InputStream::prepared(const std::string& dir, const std::string& split, const Tokenizer& expected) {
  InputStream s;
  s.prepared_ = std::make_unique<Prepared>();
  PreparedOpenOptions o;
  o.split = split;
  o.cluster_sampling = false;
  s.prepared_->corpus = std::make_unique<PreparedCorpus>(dir, o);
  require_prepared_tokenizer(*s.prepared_->corpus, dir, expected, "the model");
  s.prepared_->tok = &expected;
  s.prepared_->split = split;
  s.prepared_->chars = prepared_residue_chars(expected);
  s.rewind();
  return s;
}

void InputStream::rewind() {
  position_ = 0;
  stats_ = DatasetStats();
  if (!files_) return;
  Files& f = *files_;
  f.reader.reset();
  f.formats.clear();
  f.next_file = 0;
  stats_.path = f.spec;
  stats_.skipped_files = f.inputs.skipped;
  if (!f.inputs.files.empty()) {
    ReaderOptions o = f.options;
    o.max_records = 0;  // counted over all files here
    f.reader = std::make_unique<SequenceReader>(f.inputs.files[0], o);
    f.next_file = 1;
  }
}

void InputStream::close_file() {
  Files& f = *files_;
  const SequenceReader& r = *f.reader;
  stats_.skipped_empty += r.skipped_empty();
  stats_.skipped_malformed += r.skipped_malformed();
  if (stats_.first_error.empty()) stats_.first_error = r.first_error();
  stats_.files += 1;
  const std::string name = format_name(r.format());
  if (std::find(f.formats.begin(), f.formats.end(), name) == f.formats.end()) {
    f.formats.push_back(name);
    stats_.format += (stats_.format.empty() ? "" : "+") + name;
  }
  f.reader.reset();
}

bool InputStream::next(SequenceRecord& rec) {
  Files& f = *files_;
  if (f.options.max_records && position_ >= f.options.max_records) return false;
  while (f.reader) {
    if (f.reader->next(rec)) return true;
    close_file();
    if (f.next_file < f.inputs.files.size()) {
      ReaderOptions o = f.options;
      o.max_records = 0;
      f.reader = std::make_unique<SequenceReader>(f.inputs.files[f.next_file++], o);
    }
  }
  return false;
}

void InputStream::count(uint64_t length) {
  stats_.min_length = stats_.records == 0 ? length : std::min(stats_.min_length, length);
  stats_.max_length = std::max(stats_.max_length, length);
  stats_.records += 1;
  stats_.bytes += length;
  position_ += 1;
}

uint64_t InputStream::read(uint64_t count_wanted, SequenceDataset& out) {
  out = SequenceDataset();
  uint64_t got = 0;
  if (prepared_) {
    Prepared& p = *prepared_;
    const PreparedCorpus& c = *p.corpus;
    for (; got < count_wanted && position_ < c.records(); ++got) {
      const uint64_t i = position_;
      p.ids.clear();
      c.append_tokens(i, 0, c.length(i), *p.tok, p.ids);
      p.seq.resize(p.ids.size());
      for (size_t t = 0; t < p.ids.size(); ++t) p.seq[t] = p.chars[size_t(p.ids[t])];
      out.add(p.seq, p.split + ":" + std::to_string(i));
      count(p.seq.size());
    }
    return got;
  }
  SequenceRecord rec;
  for (; got < count_wanted && next(rec); ++got) {
    // (a table or text line without a name column: named by its place in the input, which is
    // its row in the outputs, as a prepared split's records are)
    out.add(rec.sequence, rec.name.empty() ? "record:" + std::to_string(position_) : rec.name,
            files_->options.keep_empty);
    count(rec.sequence.size());
  }
  return got;
}

uint64_t InputStream::skip(uint64_t count_wanted) {
  uint64_t got = 0;
  if (prepared_) {
    const PreparedCorpus& c = *prepared_->corpus;
    for (; got < count_wanted && position_ < c.records(); ++got) count(c.length(position_));
    return got;
  }
  SequenceRecord rec;
  for (; got < count_wanted && next(rec); ++got) count(rec.sequence.size());
  return got;
}

bool DuplicateNames::HashSet::insert(uint64_t h) {
  if (2 * (used_ + 1) > slots_.size()) {  // grow: twice the slots, every hash placed again
    std::vector<uint64_t> old = std::exchange(slots_, std::vector<uint64_t>(std::max<size_t>(1024, 2 * slots_.size())));
    used_ = 0;
    for (uint64_t o : old)
      if (o) insert(o);
  }
  h += h == 0;  // (0 marks an empty slot)
  const size_t mask = slots_.size() - 1;
  for (size_t i = size_t(h) & mask;; i = (i + 1) & mask) {
    if (slots_[i] == h) return false;
    if (slots_[i] == 0) {
      slots_[i] = h;
      ++used_;
      return true;
    }
  }
}

void DuplicateNames::add(std::string_view name) {
  const uint64_t h = mix64(fnv1a(name));
  if (seen_.insert(h) || !repeated_.insert(h)) return;
  if (names_++ == 0) first_ = name;
}

std::string DuplicateNames::note(const std::string& input) const {
  if (names_ == 0) return "";
  return input + ": " + std::to_string(names_) + (names_ == 1 ? " record name appears" : " record names appear") +
         " more than once; first duplicate: '" + first_ +
         "'; rows keep input order (match outputs to the input by position, not by name)";
}

DatasetStats scan(InputStream& in, const std::function<void(uint64_t, std::string_view)>& visit, uint64_t piece,
                  RecordsFingerprint* fingerprint) {
  in.rewind();
  SequenceDataset part;
  DuplicateNames duplicates;
  for (uint64_t first = 0;;) {
    const uint64_t n = in.read(std::max<uint64_t>(1, piece), part);
    for (uint64_t i = 0; i < n; ++i) {
      visit(first + i, part.sequence(i));
      duplicates.add(part.name(i));
      if (fingerprint) fingerprint->add(part.name(i), part.sequence(i));
    }
    first += n;
    if (n == 0) break;
  }
  const DatasetStats stats = in.stats();
  in.rewind();
  if (const std::string text = duplicates.note(stats.path); !text.empty()) note(text);
  return stats;
}

StreamedCorpus::StreamedCorpus(InputStream& in, uint64_t records, uint64_t piece, std::string summary)
    : in_(in), records_(records), piece_(std::max<uint64_t>(1, piece)), summary_(std::move(summary)) {
  cur_first_ = prev_first_ = in_.position();
}

std::pair<const SequenceDataset*, uint64_t> StreamedCorpus::at(uint64_t i) const {
  BIOFM_CHECK(i < records_, "record ", i, " of ", records_);
  BIOFM_CHECK(i >= prev_first_, "streamed input: record ", i, " was asked for after record ", cur_first_,
              " (records are read forward)");
  while (i >= cur_first_ + cur_.size()) {
    const uint64_t end = cur_first_ + cur_.size();
    if (i >= end + piece_) {  // a whole piece or more ahead: nothing to keep
      in_.skip(i - end);
      prev_ = SequenceDataset();
      prev_first_ = cur_first_ = in_.position();
      cur_ = SequenceDataset();
    } else {
      prev_ = std::move(cur_);
      prev_first_ = cur_first_;
      cur_first_ = end;
    }
    const uint64_t n = in_.read(piece_, cur_);
    if (n == 0) fail("the input ended after ", in_.position(), " records; ", records_, " were counted before (did it change?)");
  }
  if (i >= cur_first_) return {&cur_, i - cur_first_};
  return {&prev_, i - prev_first_};
}

uint64_t StreamedCorpus::length(uint64_t i) const {
  const auto [d, k] = at(i);
  return d->length(k);
}

std::string_view StreamedCorpus::sequence(uint64_t i) const {
  const auto [d, k] = at(i);
  return d->sequence(k);
}

std::string_view StreamedCorpus::name(uint64_t i) const {
  const auto [d, k] = at(i);
  return d->name(k);
}

uint64_t StreamedCorpus::append_tokens(uint64_t i, uint64_t start, uint64_t n, const Tokenizer& tok,
                                       std::vector<int32_t>& out) const {
  const auto [d, k] = at(i);
  return d->append_tokens(k, start, n, tok, out);
}

}  // namespace biofm::infer
