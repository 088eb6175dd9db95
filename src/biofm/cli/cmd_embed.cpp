// biofm embed: final hidden states of a model (any family with embed support) for every
// sequence of a file.
// (biofm eval lives in cmd_eval.cpp.)
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "biofm/cli/commands.h"
#include "biofm/cli/flags.h"
#include "biofm/cli/model_flags.h"
#include "biofm/core/device_memory.h"
#include "biofm/data/dataset.h"
#include "biofm/data/pack.h"
#include "biofm/data/tokenizer.h"
#include "biofm/io/atomic_file.h"
#include "biofm/io/safetensors.h"
#include "biofm/io/utf8.h"
#include "biofm/models/registry.h"

namespace biofm {

namespace {

const CommandSpec kEmbed{
    "embed",
    "--model DIR --input FILE --output OUT.safetensors [--per-token] [--logits]\n"
    "       [--device cpu|cuda] [--max-tokens 8192] [--max-seq-length 1024] [--format auto] [--column sequence]",
    "Writes 'embeddings' [n, hidden]: the mean of the final hidden states over each sequence's residues\n"
    "(<cls>/<BOS> and <eos>/<EOS> excluded). --per-token adds 'token_embeddings' [T, hidden], 'input_ids' [T] and\n"
    "'offsets' [n+1] (all tokens, specials included); --logits adds 'logits' [T, vocab].\n"
    "Sequence names are in the metadata entry 'names' (a JSON list).\n"
    "--input: a file, a directory, a glob (quote it) or a comma-separated list of these, read in order;\n"
    "fasta, csv, tsv, jsonl or text, each plain, .gz or .zst (docs/DATA.md).",
    {
        {"--model", "DIR", "model directory (config.json + weights)"},
        {"--input", "FILE", "sequences to embed (see above)"},
        {"--output", "OUT", "safetensors file to write"},
        {"--per-token", "", "also write token_embeddings, input_ids and offsets"},
        {"--logits", "", "with --per-token: also write logits [T, vocab]"},
        {"--device", "D", "cpu | cuda (default cpu)"},
        {"--max-tokens", "N", "tokens per batch (default 8192; at least --max-seq-length)"},
        {"--max-seq-length", "N", "longer sequences are truncated (default 1024, or the model's max positions)"},
        {"--format", "F", "input format: auto | fasta | csv | tsv | jsonl | text (default auto)"},
        {"--column", "NAME", "csv/tsv column or jsonl field holding the sequence (default sequence)"},
    }};

}  // namespace

int cmd_embed(int argc, char** argv) {
  const Flags a = parse_flags(kEmbed, argc, argv);
  if (a.help()) {
    print_help(kEmbed);
    return 0;
  }
  a.expect_no_positional();
  const std::string model_dir = a.require("--model"), input = a.require("--input"), out_path = a.require("--output");
  const Device dev = parse_device(a.get("--device", "cpu"));
  const ModelFamily& family = family_of_dir(model_dir);
  if (!family.embed) fail("embed does not support model_type '", family.hf_model_type, "'");
  std::unique_ptr<LanguageModel> model = load_model(family, model_dir, dev);
  const Tokenizer& tok = family.tokenizer();
  SequenceDataset data = SequenceDataset::load(input, reader_options(a));
  // At least one residue between the two special tokens; the limits keep buffers sane.
  const int64_t max_len =
      a.get_int("--max-seq-length", std::min<int64_t>(1024, model->dims().max_positions), 3, kMaxFlagTokens);
  const int64_t max_tokens = std::max<int64_t>(a.get_int("--max-tokens", 8192, 1, kMaxFlagTokens), max_len);
  const bool per_token = a.has("--per-token"), want_logits = a.has("--logits");
  const int64_t H = model->dims().hidden, V = model->dims().vocab, n = int64_t(data.size());
  Tensor pooled = Tensor::zeros({n, H}, DType::F32);
  std::vector<int32_t> all_ids;
  std::vector<int64_t> offsets{0};
  std::vector<float> token_states, token_logits;
  uint64_t truncated = 0, unknown = 0;
  BatchBuilder builder;
  std::vector<int64_t> batch_members;
  auto flush = [&]() {
    if (builder.num_sequences() == 0) return;
    Batch b = builder.build(BatchMode::Thd, 1, tok.pad_id());
    Batch db = b.to(dev);
    Tensor hidden = model->hidden_states(db).to(Device::CPU);
    Tensor lg = want_logits ? model->logits(db).to(Device::CPU) : Tensor();
    for (size_t s = 0; s < batch_members.size(); ++s) {
      const int64_t start = b.cu_seqlens.i32()[s], len = b.seq_lens.i32()[s];
      float* dst = pooled.f32() + batch_members[s] * H;
      for (int64_t t = start + 1; t < start + len - 1; ++t)
        for (int64_t h = 0; h < H; ++h) dst[h] += hidden.f32()[t * H + h];
      const float inv = len > 2 ? 1.0f / float(len - 2) : 0.0f;
      for (int64_t h = 0; h < H; ++h) dst[h] *= inv;
      if (per_token) {
        all_ids.insert(all_ids.end(), b.input_ids.i32() + start, b.input_ids.i32() + start + len);
        offsets.push_back(offsets.back() + len);
        token_states.insert(token_states.end(), hidden.f32() + start * H, hidden.f32() + (start + len) * H);
        if (want_logits) token_logits.insert(token_logits.end(), lg.f32() + start * V, lg.f32() + (start + len) * V);
      }
    }
    builder.clear();
    batch_members.clear();
  };
  std::vector<int32_t> ids;
  nlohmann::json names = nlohmann::json::array();
  Utf8Cleaner clean_name(input);
  for (int64_t i = 0; i < n; ++i) {
    ids = tok.encode(data.sequence(uint64_t(i)));
    for (size_t t = 1; t + 1 < ids.size(); ++t) unknown += ids[t] == tok.unk_id();
    if (int64_t(ids.size()) > max_len) {
      ids.resize(size_t(max_len));
      ids.back() = tok.end_id();
      ++truncated;
    }
    if (builder.num_tokens() + int64_t(ids.size()) > max_tokens) flush();
    std::vector<int32_t> labels(ids.size(), -100);
    builder.add(ids.data(), labels.data(), int64_t(ids.size()));
    batch_members.push_back(i);
    names.push_back(clean_name(data.name(uint64_t(i))));
  }
  flush();

  std::map<std::string, Tensor> out{{"embeddings", pooled}};
  if (per_token) {
    const int64_t T = int64_t(all_ids.size());
    out["input_ids"] = Tensor::from_i32({T}, all_ids);
    Tensor off = Tensor::empty({n + 1}, DType::I64);
    for (int64_t i = 0; i <= n; ++i) off.i64()[i] = offsets[size_t(i)];
    out["offsets"] = off;
    out["token_embeddings"] = Tensor::from_f32({T, H}, token_states);
    if (want_logits) out["logits"] = Tensor::from_f32({T, V}, token_logits);
  }
  write_safetensors(out_path, out, {{"names", names.dump()}, {"pooling", "mean over residues, first and last (special) tokens excluded"}});
  std::printf("embedded %s (hidden %lld) -> %s", data.stats().summary().c_str(), (long long)H, out_path.c_str());
  std::printf(" | %llu truncated to %lld tokens, %llu unknown residues, %llu empty records skipped\n",
              (unsigned long long)truncated, (long long)max_len, (unsigned long long)unknown,
              (unsigned long long)data.stats().skipped_empty);
  return 0;
}

}  // namespace biofm
