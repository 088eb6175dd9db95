#include "biofm/data/stream.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "biofm/core/error.h"
#include "biofm/core/notes.h"
#include "biofm/core/rng.h"
#include "biofm/data/batch_source.h"
#include "biofm/data/causal.h"
#include "biofm/data/input_files.h"
#include "biofm/data/sampler.h"

namespace biofm {

StreamOptions stream_options(const DataOptions& d, bool causal, uint64_t buffer, const ReaderOptions& reader) {
  StreamOptions so;
  so.reader = reader;
  so.seed = d.seed;
  so.shuffle = d.shuffle;
  so.buffer = buffer;
  if (causal) {
    so.window_max_seq_length = d.max_seq_length;
    so.window_stride = d.stride;
  }
  return so;
}

StreamingCorpus::StreamingCorpus(const std::string& spec, const StreamOptions& options)
    : spec_(spec), opt_(options) {
  if (opt_.buffer < 1) fail("dataset.shuffle_buffer must be at least 1, got ", opt_.buffer);
  if (opt_.buffer > (uint64_t(1) << 31)) fail("dataset.shuffle_buffer must be at most 2^31, got ", opt_.buffer);
  if (opt_.window_max_seq_length) {
    CausalLmOptions c;
    c.max_seq_length = opt_.window_max_seq_length;
    c.stride = opt_.window_stride;
    c.max_tokens_per_batch = c.max_seq_length;
    validate(c);
  }
  opt_.reader.max_records = 0;
  alphabet_ = opt_.alphabet;
  InputFiles in = expand_inputs(spec);
  files_ = std::move(in.files);
  skipped_files_ = in.skipped;
  // Missing or unreadable files fail now, not hours into the first pass.
  for (const std::string& f : files_)
    if (::access(f.c_str(), R_OK) != 0)
      fail("cannot open ", f, ": ", errno == ENOENT ? "no such file" : std::strerror(errno));
}

StreamingCorpus::~StreamingCorpus() = default;

void StreamingCorpus::restart() const {
  reader_.reset();
  file_ = records_in_pass_ = 0;
  pass_ = records_read_ = skipped_ = 0;
  pending_.clear();
  buffer_.clear();
  window_.clear();
  base_ = 0;
  alphabet_ = opt_.alphabet;
}

void StreamingCorpus::open_next_file() const {
  if (file_ == files_.size()) {  // a pass is over: the next one starts
    if (records_in_pass_ == 0) fail("dataset ", spec_, ": no sequences to stream");
    if (alphabet_ && alphabet_->residues && !std::exchange(alphabet_noted_, true))
      note(spec_ + ": " + alphabet_->text());
    ++pass_;
    file_ = 0;
    records_in_pass_ = 0;
  }
  // With shuffle, each pass reads the files in its own seeded order (as the shards of a
  // streamed Hugging Face dataset are); the permutation is computed per index.
  const uint64_t n = files_.size();
  const uint64_t f = opt_.shuffle ? permute_index(file_, n, opt_.seed, pass_.load()) : file_;
  reader_ = std::make_unique<SequenceReader>(files_[size_t(f)], opt_.reader);
  ++file_;
}

std::string StreamingCorpus::next_item() const {
  while (pending_.empty()) {
    if (!reader_) open_next_file();
    if (!reader_->next(rec_)) {
      // (counted in the first pass only: later passes skip the same records again)
      if (pass_.load() == 0) skipped_ += reader_->skipped_empty() + reader_->skipped_malformed();
      reader_.reset();
      continue;
    }
    ++records_in_pass_;
    ++records_read_;
    if (alphabet_ && pass_.load() == 0) alphabet_->add(rec_.sequence);
    if (!opt_.window_max_seq_length) {
      pending_.push_back(std::move(rec_.sequence));
    } else {
      for (const Window& w : make_windows(rec_.sequence.size(), opt_.window_max_seq_length, opt_.window_stride))
        pending_.push_back(rec_.sequence.substr(size_t(w.start), size_t(w.length)));
    }
  }
  std::string s = std::move(pending_.front());
  pending_.pop_front();
  return s;
}

std::string StreamingCorpus::next_sample(uint64_t k) const {
  if (!opt_.shuffle || opt_.buffer == 1) return next_item();
  while (buffer_.size() < opt_.buffer) buffer_.push_back(next_item());
  const uint32_t slot = rng_below(opt_.seed, RngStream::StreamBuffer, k, 0, uint32_t(opt_.buffer));
  std::string s = std::move(buffer_[slot]);
  buffer_[slot] = next_item();
  return s;
}

const std::string& StreamingCorpus::sample(uint64_t i) const {
  if (i < base_) {  // an earlier sample: replay the stream from its start
    restart();
    ++replays_;
  }
  for (;;) {
    // Samples before i are never asked for again (the cursor only moves forward): dropped as
    // they are passed, so a jump far ahead (a resume) holds no more than the buffer.
    while (base_ < i && !window_.empty()) {
      window_.pop_front();
      ++base_;
    }
    if (i < base_ + window_.size()) return window_[size_t(i - base_)];
    window_.push_back(next_sample(base_ + window_.size()));
  }
}

uint64_t StreamingCorpus::append_tokens(uint64_t i, uint64_t start, uint64_t n, const Tokenizer& tok,
                                        std::vector<int32_t>& out) const {
  const std::string& s = sample(i);
  BIOFM_CHECK(start + n <= s.size(), "stream sample ", i, ": residues [", start, ", ", start + n, ") of ", s.size());
  return tok.encode_residues(std::string_view(s).substr(size_t(start), size_t(n)), out);
}

std::string StreamingCorpus::summary() const {
  std::string s = "streamed from " + std::to_string(files_.size()) + (files_.size() == 1 ? " file" : " files");
  if (skipped_files_) s += " (" + std::to_string(skipped_files_) + " skipped: unknown extension)";
  s += ", shuffle buffer " + (opt_.shuffle ? std::to_string(opt_.buffer) : std::string("off"));
  if (records_read_.load() > 0)  // (not at start: the banner is printed before the first read)
    s += "; " + std::to_string(records_read_.load()) + " records read, pass " + std::to_string(pass_.load() + 1);
  return s;
}

}  // namespace biofm
