// Hugging Face directories exactly as transformers' save_pretrained writes them
// (tests/fixtures/hf_dirs, made by tools/make_hf_dir_fixtures.py): legacy LayerNorm names,
// the ESM contact head, rotary buffers, shards, bf16/fp16 weights, a bare EsmModel, Llama
// tied and untied. Our logits must match transformers' within 1e-4; broken directories must
// fail naming what is wrong.
#include "biofm/models/hf_dir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "biofm/io/atomic_file.h"
#include "biofm/data/tokenizer.h"
#include "biofm/io/safetensors.h"
#include "biofm/models/esm2/model.h"
#include "biofm/models/llama/model.h"
#include "biofm/models/registry.h"
#include "hf_fixture.h"

using namespace biofm;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) { return std::string(BIOFM_SOURCE_DIR) + "/tests/fixtures/hf_dirs/" + name; }

// max |ours - ref| over every position of the fixture's (unpadded) batch.
double worst_diff(const Tensor& ours, const Tensor& ref, const std::vector<int64_t>& row_of) {
  const int64_t C = ref.size(-1);
  double worst = 0;
  for (size_t i = 0; i < row_of.size(); ++i)
    for (int64_t c = 0; c < C; ++c)
      worst = std::max(worst, double(std::fabs(ours.f32()[row_of[i] * C + c] - ref.f32()[int64_t(i) * C + c])));
  std::printf("[hf_dir] max|diff| %.3g, max|ref| %.3g\n", worst, testkit::max_abs(ref));
  return worst;
}

// Loads with the family's from_hf_dir, returns the stderr notes and the worst difference of
// the logits (or, for a base model, the last hidden states) from transformers'.
template <class Model>
double check_dir(const std::string& name, bool causal, std::string& notes, const char* what = "logits",
                 const std::string& dir = "") {  // dir: a copy of the fixture to load instead
  testing::internal::CaptureStderr();
  auto model = Model::from_hf_dir(dir.empty() ? fixture(name) : dir, Device::CPU);
  notes = testing::internal::GetCapturedStderr();
  SafetensorsFile ref = read_safetensors(fixture(name) + "/reference.safetensors");
  std::vector<int64_t> row_of;
  Batch batch = testkit::hf_fixture_batch(ref, /*packed=*/false, causal, row_of);
  Tensor ours = std::string(what) == "logits" ? model->logits(batch) : model->hidden_states(batch);
  return worst_diff(ours, ref.get(what), row_of);
}

std::string copy_fixture(const std::string& name, const std::string& as) {
  const std::string dir = testing::TempDir() + "/biofm_hfdir_" + as;
  fs::remove_all(dir);
  fs::copy(fixture(name), dir, fs::copy_options::recursive);
  return dir;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(ModelsHfDir, EsmMaskedLmWithLegacyNamesAndContactHead) {
  std::string notes;
  EXPECT_LT(check_dir<Esm2Model>("esm2_mlm", false, notes), 1e-4);
  // The contact head, kept for exports, is not noted at every load (training notes it where it
  // writes its export: E2eHardening.FineTuningNotesTheContactHeadAtTheExportOnly).
  EXPECT_EQ(notes.find("contact"), std::string::npos) << notes;
  EXPECT_NE(notes.find("1 rotary inv_freq tensor"), std::string::npos) << notes;
  EXPECT_EQ(std::count(notes.begin(), notes.end(), '\n'), 1) << "one note: " << notes;
}

// The contact head (which masked-LM training does not touch) goes into exports as it was read, so
// a fine-tuned facebook/esm2 still predicts contacts in transformers; a bare EsmModel's head
// gets the masked-LM model's prefix.
TEST(ModelsHfDir, EsmExportsCarryTheContactHead) {
  for (const char* name : {"esm2_mlm", "esm2_base"}) {
    testing::internal::CaptureStderr();
    auto model = Esm2Model::from_hf_dir(fixture(name), Device::CPU);
    (void)testing::internal::GetCapturedStderr();
    const std::string out = testing::TempDir() + "/biofm_hfdir_export_" + name;
    fs::remove_all(out);
    model->save_hf_dir(out);
    const SafetensorsFile ours = read_safetensors(out + "/model.safetensors");
    const SafetensorsFile theirs = read_safetensors(fixture(name) + "/model.safetensors");
    const std::string prefix = std::string(name) == "esm2_base" ? "" : "esm.";
    for (const char* t : {"contact_head.regression.weight", "contact_head.regression.bias"}) {
      ASSERT_TRUE(ours.has(std::string("esm.") + t)) << name << " " << t;
      const Tensor& a = ours.get(std::string("esm.") + t);
      const Tensor& b = theirs.get(prefix + t);
      ASSERT_EQ(a.numel(), b.numel()) << t;
      for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.f32()[i], b.f32()[i]) << name << " " << t << " " << i;
    }
    // and the export loads back (the head carried again), without a note
    testing::internal::CaptureStderr();
    auto again = Esm2Model::from_hf_dir(out, Device::CPU);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    EXPECT_EQ(again->carried_tensors().size(), 2u);
  }
}

TEST(ModelsHfDir, EsmSharded) {
  ASSERT_TRUE(fs::exists(fixture("esm2_sharded/model.safetensors.index.json")));
  const HfDirContents c = read_hf_dir(fixture("esm2_sharded"));
  EXPECT_GT(c.weight_files.size(), 1u);
  std::string notes;
  EXPECT_LT(check_dir<Esm2Model>("esm2_sharded", false, notes), 1e-4);
  EXPECT_EQ(Esm2Model::from_hf_dir(fixture("esm2_sharded"), Device::CPU)->carried_tensors().size(), 2u)
      << "the contact head, from its shard";
}

// transformers saves ESM's rotary inv_freq buffer in the model's dtype and, loading, uses that
// rounded copy (bf16: 0.10009765625 for 0.1); biofm ignores the buffer and computes the
// frequencies in fp32, as from an fp32 checkpoint. That alone moves logits of ~2 by up to
// ~1e-4 (bf16) / ~3e-5 (fp16); the weights themselves are widened exactly.
TEST(ModelsHfDir, EsmHalfPrecisionWeights) {
  std::string notes;
  EXPECT_LT(check_dir<Esm2Model>("esm2_bf16", false, notes), 3e-4) << "bf16";
  EXPECT_LT(check_dir<Esm2Model>("esm2_fp16", false, notes), 1e-4) << "fp16";
}

TEST(ModelsHfDir, BareEsmModelWithoutPrefixOrHead) {
  std::string notes;
  EXPECT_LT(check_dir<Esm2Model>("esm2_base", false, notes, "last_hidden_state"), 1e-4);
  EXPECT_NE(notes.find("pooler"), std::string::npos) << notes;
  EXPECT_NE(notes.find("bare base model"), std::string::npos) << notes;
  EXPECT_EQ(std::count(notes.begin(), notes.end(), '\n'), 1) << "one note: " << notes;
  // The absent LM head is initialised as a new model's: what init(seed) gives it.
  auto m = Esm2Model::from_hf_dir(std::string(BIOFM_SOURCE_DIR) + "/tests/fixtures/hf_dirs/esm2_base", Device::CPU,
                                  Precision::F32, /*init_seed=*/5);
  Esm2Model fresh(m->config(), Device::CPU);
  fresh.params().init(5);
  for (const char* n : {"lm_head.dense.weight", "lm_head.layer_norm.weight", "lm_head.bias"}) {
    Tensor a = m->params().param(n), b = fresh.params().param(n);
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.f32()[i], b.f32()[i]) << n << " " << i;
  }
  EXPECT_NE(m->params().param("lm_head.dense.weight").f32()[0], 0.0f);
}

TEST(ModelsHfDir, LlamaTiedAndUntied) {
  std::string notes;
  EXPECT_LT(check_dir<LlamaModel>("llama_untied", true, notes), 1e-4) << "untied";
  EXPECT_EQ(notes, "");
  EXPECT_LT(check_dir<LlamaModel>("llama_tied", true, notes), 1e-4) << "tied";
  EXPECT_EQ(notes, "");
}

TEST(ModelsHfDir, LoadModelDirPicksTheFamily) {
  testing::internal::CaptureStderr();
  auto m = load_model_dir(fixture("esm2_sharded"), Device::CPU);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(m->family(), "esm2");
  EXPECT_EQ(load_model_dir(fixture("llama_tied"), Device::CPU)->family(), "llama");
}

TEST(ModelsHfDir, MissingShardIsNamed) {
  const std::string dir = copy_fixture("esm2_sharded", "missing_shard");
  fs::remove(dir + "/model-00002-of-00003.safetensors");
  const std::string msg = error_of([&] { read_hf_dir(dir); });
  EXPECT_NE(msg.find("model-00002-of-00003.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST(ModelsHfDir, ShardNamesOutsideTheDirectoryAreRefused) {
  // An index from the internet may name any path; only plain files beside it are read.
  for (const std::string bad : {"/dev/zero", "../esm2_sharded/model-00001-of-00003.safetensors", "", ".", "sub/x"}) {
    const std::string dir = copy_fixture("esm2_sharded", "bad_shard_name");
    const std::string index = dir + "/model.safetensors.index.json";
    nlohmann::json j = nlohmann::json::parse(read_file(index));
    j["weight_map"].begin().value() = bad;
    write_file_atomic(index, j.dump());
    const std::string msg = error_of([&] { read_hf_dir(dir); });
    EXPECT_NE(msg.find("not a file name in the directory"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("model.safetensors.index.json"), std::string::npos) << msg;
  }
  const std::string dir = copy_fixture("esm2_sharded", "dir_shard");
  fs::remove(dir + "/model-00002-of-00003.safetensors");
  fs::create_directory(dir + "/model-00002-of-00003.safetensors");
  const std::string msg = error_of([&] { read_hf_dir(dir); });
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
}

TEST(ModelsHfDir, PickleOnlyDirectoryIsRefused) {
  const std::string dir = testing::TempDir() + "/biofm_hfdir_pickle";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy(fixture("esm2_mlm/config.json"), dir + "/config.json");
  write_file_atomic(dir + "/pytorch_model.bin", "PK not really a pickle");
  const std::string msg = error_of([&] { Esm2Model::from_hf_dir(dir, Device::CPU); });
  EXPECT_NE(msg.find("pytorch_model.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("save_pretrained"), std::string::npos) << msg;
}

TEST(ModelsHfDir, WrongShapeAndUnknownTensorAreNamed) {
  SafetensorsFile f = read_safetensors(fixture("esm2_mlm/model.safetensors"));
  {
    const std::string dir = copy_fixture("esm2_mlm", "wrong_shape");
    auto t = f.tensors;
    t["lm_head.bias"] = Tensor::zeros({34}, DType::F32);
    write_safetensors(dir + "/model.safetensors", t);
    const std::string msg = error_of([&] { Esm2Model::from_hf_dir(dir, Device::CPU); });
    EXPECT_NE(msg.find("lm_head.bias"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[34]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  }
  {
    const std::string dir = copy_fixture("esm2_mlm", "unknown");
    auto t = f.tensors;
    t["esm.encoder.layer.0.adapter.weight"] = Tensor::zeros({2, 2}, DType::F32);
    write_safetensors(dir + "/model.safetensors", t);
    const std::string msg = error_of([&] { Esm2Model::from_hf_dir(dir, Device::CPU); });
    EXPECT_NE(msg.find("esm.encoder.layer.0.adapter.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected"), std::string::npos) << msg;
  }
  {
    const std::string dir = copy_fixture("esm2_mlm", "missing_param");
    auto t = f.tensors;
    t.erase("esm.encoder.layer.1.output.dense.weight");
    write_safetensors(dir + "/model.safetensors", t);
    const std::string msg = error_of([&] { Esm2Model::from_hf_dir(dir, Device::CPU); });
    EXPECT_NE(msg.find("esm.encoder.layer.1.output.dense.weight"), std::string::npos) << msg;
  }
}

// transformers' EsmForMaskedLM with tie_word_embeddings false decodes with its own
// lm_head.decoder.weight; biofm's ESM-2 decodes with the word embeddings, so such a directory is
// refused (it used to load with the tied decoder, the real one dropped as "redundant"). Tied (or
// the key absent: ESM's default), a decoder copy in the file is ignored, whatever it holds.
TEST(ModelsHfDir, EsmUntiedDecoderIsRefusedATiedCopyIgnored) {
  SafetensorsFile f = read_safetensors(fixture("esm2_mlm/model.safetensors"));
  auto t = f.tensors;
  const int64_t H = t.at("esm.embeddings.word_embeddings.weight").size(1);
  t["lm_head.decoder.weight"] = Tensor::zeros({33, H}, DType::F32);  // not the embeddings
  auto with_tie = [&](const std::string& as, const char* tie) {
    const std::string dir = copy_fixture("esm2_mlm", as);
    write_safetensors(dir + "/model.safetensors", t);
    nlohmann::json c = nlohmann::json::parse(read_file(dir + "/config.json"));
    if (tie) c["tie_word_embeddings"] = nlohmann::json::parse(tie);
    else c.erase("tie_word_embeddings");
    write_file_atomic(dir + "/config.json", c.dump(2));
    return dir;
  };
  const std::string untied = with_tie("untied_decoder", "false");
  const std::string msg = error_of([&] { Esm2Model::from_hf_dir(untied, Device::CPU); });
  EXPECT_NE(msg.find("config.json: tie_word_embeddings=false"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lm_head.decoder.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not supported"), std::string::npos) << msg;
  for (const char* tie : {"true", static_cast<const char*>(nullptr)}) {
    std::string notes;
    EXPECT_LT(check_dir<Esm2Model>("esm2_mlm", false, notes, "logits", with_tie("tied_copy", tie)), 1e-4);
    EXPECT_NE(notes.find("1 tensor tied to the word embeddings (lm_head.decoder.weight)"), std::string::npos) << notes;
    EXPECT_EQ(notes.find("redundant"), std::string::npos) << notes;
  }
}

// The ESM-2 tokenizer is built in: a vocab.txt that differs from it is refused, naming the first
// line that differs; the same vocabulary (however its lines end) or none is fine.
TEST(ModelsHfDir, EsmVocabTxtMustBeTheBuiltInOne) {
  const std::string dir = copy_fixture("esm2_mlm", "vocab");
  const std::vector<std::string>& v = EsmTokenizer::vocab();
  auto load_with = [&](const std::vector<std::string>& lines, const std::string& eol, bool last_eol) {
    std::string text;
    for (size_t i = 0; i < lines.size(); ++i) text += lines[i] + (i + 1 < lines.size() || last_eol ? eol : "");
    write_file_atomic(dir + "/vocab.txt", text);
    testing::internal::CaptureStderr();
    const std::string e = error_of([&] { Esm2Model::from_hf_dir(dir, Device::CPU); });
    testing::internal::GetCapturedStderr();
    return e;
  };
  EXPECT_EQ(load_with(v, "\n", true), "(no error)");
  EXPECT_EQ(load_with(v, "\n", false), "(no error)");  // as transformers writes it
  EXPECT_EQ(load_with(v, "\r\n", true), "(no error)");
  std::vector<std::string> swapped = v;
  std::swap(swapped[5], swapped[6]);
  std::string msg = load_with(swapped, "\n", false);
  EXPECT_NE(msg.find("vocab.txt: line 6 is 'G', the ESM-2 vocabulary's is 'A'"), std::string::npos) << msg;
  msg = load_with(std::vector<std::string>(v.begin(), v.end() - 1), "\n", true);
  EXPECT_NE(msg.find("line 33 is missing"), std::string::npos) << msg;
  std::vector<std::string> longer = v;
  longer.push_back("<extra>");
  msg = load_with(longer, "\n", true);
  EXPECT_NE(msg.find("line 34 is '<extra>'"), std::string::npos) << msg;
  msg = load_with({}, "\n", false);
  EXPECT_NE(msg.find("line 1 is missing"), std::string::npos) << msg;
  fs::remove(dir + "/vocab.txt");
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(Esm2Model::from_hf_dir(dir, Device::CPU));
  testing::internal::GetCapturedStderr();
}
