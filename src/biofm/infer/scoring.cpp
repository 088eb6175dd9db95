#include "biofm/infer/scoring.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

#include "biofm/core/error.h"
#include "biofm/data/causal.h"
#include "biofm/data/csv_fields.h"
#include "biofm/data/pack.h"
#include "biofm/infer/batching.h"
#include "biofm/io/atomic_file.h"

namespace biofm::infer {

namespace {

int32_t residue_id(const Tokenizer& tok, char c, bool* known) {
  std::vector<int32_t> one;
  *known = tok.encode_residues(std::string_view(&c, 1), one) == 0 && one.size() == 1;
  return one.empty() ? tok.unk_id() : one[0];
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, sep)) out.push_back(trim(part));
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

// One row of a CSV/TSV mutations table, each field trimmed (quoted fields as RFC 4180; one line).
std::vector<std::string> split_row(const std::string& s, char sep, const std::string& where) {
  CsvFields row;
  row.delim = sep;
  row.add_line(s);
  if (row.in_quotes()) fail(where, ": unterminated quoted field");
  if (!row.error().empty()) fail(where, ": ", row.error());
  std::vector<std::string> out;
  for (const std::string& f : row.fields) out.push_back(trim(f));
  return out;
}

// The batches of `items` (each `tokens` long), built by `fill(item, ids, labels)`; `use(batch,
// members, row0 of each)` reads the results. Longest first under the token budget; `model` is
// told the batches' shapes first (LanguageModel::prepare_forward).
template <class Fill, class Use>
void run_batches(LanguageModel& model, const std::vector<int64_t>& lengths, int64_t max_tokens, int32_t pad_id,
                 Fill fill, Use use) {
  std::vector<int32_t> ids, labels;
  const std::vector<std::vector<int64_t>> plan = plan_batches(lengths, max_tokens);
  model.prepare_forward(batch_shapes(plan, lengths));
  for (const std::vector<int64_t>& members : plan) {
    BatchBuilder builder;
    std::vector<int64_t> row0;
    for (int64_t i : members) {
      ids.clear();
      labels.clear();
      fill(i, ids, labels);
      row0.push_back(builder.num_tokens());
      builder.add(ids.data(), labels.data(), int64_t(ids.size()));
    }
    use(builder.build(BatchMode::Thd, 1, pad_id), members, row0);
  }
}

}  // namespace

bool standard_amino_acid(char c) {
  switch (std::toupper(static_cast<unsigned char>(c))) {
    case 'A': case 'C': case 'D': case 'E': case 'F': case 'G': case 'H': case 'I': case 'K': case 'L':
    case 'M': case 'N': case 'P': case 'Q': case 'R': case 'S': case 'T': case 'V': case 'W': case 'Y': return true;
    default: return false;
  }
}

MutationSet parse_mutation_set(std::string_view text, std::string_view wild_type, const Tokenizer& tok,
                               const std::string& where) {
  MutationSet m;
  m.text = trim(text);
  if (m.text.empty()) fail(where, ": empty mutation");
  for (const std::string& one : split(m.text, ':')) {
    // <wt><position><mt>, e.g. A123G.
    if (one.size() < 3 || !std::isdigit(static_cast<unsigned char>(one[1])))
      fail(where, ": '", one, "' is not a mutation like A123G (wild type, 1-based position, mutant)");
    Mutation mu;
    mu.wt = one.front();
    mu.mt = one.back();
    const std::string digits = one.substr(1, one.size() - 2);
    for (char c : digits)
      if (!std::isdigit(static_cast<unsigned char>(c))) fail(where, ": '", one, "': position '", digits, "' is not a number");
    if (digits.size() > 12) fail(where, ": '", one, "': position out of range");
    mu.pos = std::stoll(digits);
    if (mu.pos < 1 || mu.pos > int64_t(wild_type.size()))
      fail(where, ": '", one, "': position ", mu.pos, " is outside the sequence (1..", wild_type.size(), ")");
    for (const auto& [role, c] : {std::pair{"wild-type", mu.wt}, std::pair{"mutant", mu.mt}})
      if (!standard_amino_acid(c))
        fail(where, ": '", one, "': the ", role, " residue '", std::string(1, c),
             "' is not one of the 20 standard amino acids (ACDEFGHIKLMNPQRSTVWY)");
    mu.wt = char(std::toupper(static_cast<unsigned char>(mu.wt)));
    mu.mt = char(std::toupper(static_cast<unsigned char>(mu.mt)));
    const char have = wild_type[size_t(mu.pos - 1)];
    if (std::toupper(static_cast<unsigned char>(have)) != mu.wt)
      fail(where, ": '", one, "': the sequence has '", std::string(1, have), "' at position ", mu.pos, ", not '",
           std::string(1, mu.wt), "'");
    bool known = false;
    residue_id(tok, mu.mt, &known);
    if (!known) fail(where, ": '", one, "': '", std::string(1, mu.mt), "' is not in the model's alphabet");
    for (const Mutation& prev : m.muts)
      if (prev.pos == mu.pos) fail(where, ": position ", mu.pos, " is mutated twice in '", m.text, "'");
    m.muts.push_back(mu);
  }
  return m;
}

std::vector<MutationSet> read_mutations(const std::string& path, std::string_view wild_type, const Tokenizer& tok) {
  const std::string text = read_file(path);
  std::vector<MutationSet> out;
  std::stringstream ss(text);
  std::string line;
  int64_t lineno = 0, column = -1;
  char sep = 0;
  while (std::getline(ss, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lineno == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // (a UTF-8 byte-order mark: Excel's CSVs)
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    // The first line is a header when it has several columns or is the one column `mutant`.
    const bool tabular = t.find(',') != std::string::npos || t.find('\t') != std::string::npos;
    if (column < 0 && out.empty() && (tabular || split_row(t, ',', path + ":" + std::to_string(lineno)) ==
                                                      std::vector<std::string>{"mutant"})) {
      sep = t.find('\t') != std::string::npos ? '\t' : ',';
      const std::vector<std::string> header = split_row(t, sep, path + ":" + std::to_string(lineno));
      for (size_t i = 0; i < header.size(); ++i)
        if (header[i] == "mutant") column = int64_t(i);
      if (column < 0) fail(path, ":", lineno, ": a table needs a 'mutant' column (header: ", t, ")");
      continue;
    }
    std::string field = t;
    if (sep) {
      const std::vector<std::string> cells = split_row(t, sep, path + ":" + std::to_string(lineno));
      if (int64_t(cells.size()) <= column) fail(path, ":", lineno, ": no 'mutant' column in this row");
      field = cells[size_t(column)];
    }
    out.push_back(parse_mutation_set(field, wild_type, tok, path + ":" + std::to_string(lineno)));
  }
  if (out.empty()) fail(path, ": no mutations", column >= 0 ? " (a header and no rows)" : "");
  return out;
}

std::vector<PllResult> pseudo_log_likelihoods(LanguageModel& model, const Tokenizer& tok, const SequenceDataset& data,
                                              uint64_t first, uint64_t n, const MaskedLmOptions& o,
                                              Progress* progress) {
  if (tok.mask_id() < 0) fail("pseudo-log-likelihoods need a masked LM (a tokenizer with <mask>)");
  if (o.max_seq_length < 3) fail("--max-seq-length must be at least 3");
  std::vector<PllResult> res(n);
  struct Item {
    uint64_t record;
    int64_t pos;  // 0-based residue
  };
  std::vector<Item> items;
  std::vector<int64_t> lengths, left(n, 0);
  std::vector<std::vector<int32_t>> ids(n);
  int64_t nothing_to_score = 0;  // records whose residues are all <unk>
  for (uint64_t r = 0; r < n; ++r) {
    ids[r].push_back(tok.begin_id());
    tok.encode_residues(data.sequence(first + r), ids[r]);
    if (int64_t(ids[r].size()) + 1 > o.max_seq_length) {
      ids[r].resize(size_t(o.max_seq_length - 1));
      res[r].truncated = true;
    }
    ids[r].push_back(tok.end_id());
    const int64_t L = int64_t(ids[r].size()) - 2;
    for (int64_t p = 0; p < L; ++p) {
      if (ids[r][size_t(p + 1)] == tok.unk_id()) {
        ++res[r].unknown;
        continue;
      }
      items.push_back({r, p});
      lengths.push_back(L + 2);
      ++left[r];
    }
    res[r].positions = left[r];
    nothing_to_score += left[r] == 0;
  }
  if (progress && nothing_to_score) progress->add(nothing_to_score, 0);
  run_batches(
      model, lengths, o.max_tokens, tok.pad_id(),
      [&](int64_t i, std::vector<int32_t>& x, std::vector<int32_t>& y) {
        const Item& it = items[size_t(i)];
        x = ids[it.record];
        y.assign(x.size(), kIgnoreLabel);
        y[size_t(it.pos + 1)] = x[size_t(it.pos + 1)];
        x[size_t(it.pos + 1)] = tok.mask_id();
      },
      [&](const Batch& b, const std::vector<int64_t>& members, const std::vector<int64_t>& row0) {
        const Tensor loss = model.token_losses(b.to(model.device())).to(Device::CPU).to(DType::F32);
        int64_t done = 0;
        for (size_t k = 0; k < members.size(); ++k) {
          const Item& it = items[size_t(members[k])];
          res[it.record].pll -= double(loss.f32()[row0[k] + 1 + it.pos]);
          done += --left[it.record] == 0;
        }
        if (progress) progress->add(done, b.num_rows());
      });
  return res;
}

std::map<int64_t, std::vector<double>> masked_log_probs(LanguageModel& model, const Tokenizer& tok,
                                                        std::string_view seq, const std::vector<int64_t>& positions,
                                                        int64_t max_tokens) {
  if (tok.mask_id() < 0) fail("masked marginals need a masked LM (a tokenizer with <mask>)");
  std::vector<int32_t> ids{tok.begin_id()};
  tok.encode_residues(seq, ids);
  ids.push_back(tok.end_id());
  const int64_t V = model.dims().vocab;
  std::map<int64_t, std::vector<double>> out;
  std::vector<int64_t> lengths(positions.size(), int64_t(ids.size()));
  run_batches(
      model, lengths, std::max<int64_t>(max_tokens, int64_t(ids.size())), tok.pad_id(),
      [&](int64_t i, std::vector<int32_t>& x, std::vector<int32_t>& y) {
        x = ids;
        y.assign(x.size(), kIgnoreLabel);
        x[size_t(positions[size_t(i)])] = tok.mask_id();  // 1-based position = row (row 0 is <cls>)
      },
      [&](const Batch& b, const std::vector<int64_t>& members, const std::vector<int64_t>& row0) {
        const Tensor lg = model.logits(b.to(model.device())).to(Device::CPU).to(DType::F32);
        for (size_t k = 0; k < members.size(); ++k) {
          const int64_t pos = positions[size_t(members[k])];
          const float* row = lg.f32() + (row0[k] + pos) * V;
          double mx = -std::numeric_limits<double>::infinity(), sum = 0;
          for (int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
          for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
          std::vector<double> lp(static_cast<size_t>(V));
          for (int64_t v = 0; v < V; ++v) lp[size_t(v)] = double(row[v]) - mx - std::log(sum);
          out[pos] = std::move(lp);
        }
      });
  return out;
}

double masked_marginal_score(const MutationSet& m, const std::map<int64_t, std::vector<double>>& log_probs,
                             const Tokenizer& tok) {
  double s = 0;
  bool known = false;
  for (const Mutation& mu : m.muts) {
    const std::vector<double>& lp = log_probs.at(mu.pos);
    s += lp[size_t(residue_id(tok, mu.mt, &known))] - lp[size_t(residue_id(tok, mu.wt, &known))];
  }
  return s;
}

std::vector<CausalResult> causal_log_likelihoods(LanguageModel& model, const Tokenizer& tok,
                                                 const SequenceDataset& data, uint64_t first, uint64_t n,
                                                 const CausalOptions& o, Progress* progress) {
  if (o.window_tokens < 3) fail("windows need at least 3 tokens (<BOS>, one base, <EOS>)");
  if (o.stride < 0 || o.stride >= o.window_tokens - 2)
    fail("--stride (", o.stride, ") must lie in [0, window - 2 = ", o.window_tokens - 2, ")");
  std::vector<CausalResult> res(n);
  struct Item {
    uint64_t record;
    Window w;
    uint64_t scored_from;  // bases before this were scored in an earlier window
  };
  std::vector<Item> items;
  std::vector<int64_t> lengths, left(n, 0);
  int64_t no_windows = 0;  // empty records: done at once
  for (uint64_t r = 0; r < n; ++r) {
    const uint64_t len = data.length(first + r);
    if (o.per_base) res[r].base_ll.assign(len, std::numeric_limits<float>::quiet_NaN());
    uint64_t scored_until = 0;
    for (const Window& w : make_windows(len, o.window_tokens, o.stride)) {
      items.push_back({r, w, scored_until});
      lengths.push_back(int64_t(w.length) + 2);
      scored_until = w.start + w.length;
      ++left[r];
    }
    no_windows += left[r] == 0;
  }
  if (progress && no_windows) progress->add(no_windows, 0);
  run_batches(
      model, lengths, std::max(o.max_tokens, o.window_tokens), tok.pad_id(),
      [&](int64_t i, std::vector<int32_t>& x, std::vector<int32_t>& y) {
        const Item& it = items[size_t(i)];
        x.push_back(tok.begin_id());
        tok.encode_residues(data.sequence(first + it.record).substr(size_t(it.w.start), size_t(it.w.length)), x);
        x.push_back(tok.end_id());
        causal_labels(x, y, /*genomic_masking=*/true, o.uppercase_labels);
        // y[t] predicts base w.start + t; bases scored in an earlier window are context only.
        for (uint64_t t = 0; t < it.w.length && it.w.start + t < it.scored_from; ++t) y[size_t(t)] = kIgnoreLabel;
      },
      [&](const Batch& b, const std::vector<int64_t>& members, const std::vector<int64_t>& row0) {
        const Tensor loss = model.token_losses(b.to(model.device())).to(Device::CPU).to(DType::F32);
        const int32_t* labels = b.labels.i32();
        int64_t done = 0;
        for (size_t k = 0; k < members.size(); ++k) {
          const Item& it = items[size_t(members[k])];
          CausalResult& r = res[it.record];
          for (uint64_t t = 0; t < it.w.length; ++t) {
            const int64_t row = row0[k] + int64_t(t);
            if (labels[row] == kIgnoreLabel) continue;
            const float l = loss.f32()[row];
            r.nll += double(l);
            r.scored += 1;
            if (o.per_base) r.base_ll[size_t(it.w.start + t)] = -l;
          }
          done += --left[it.record] == 0;
        }
        if (progress) progress->add(done, b.num_rows());
      });
  return res;
}

}  // namespace biofm::infer
