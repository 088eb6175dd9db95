// config.json of each family: every number is range-checked and every type error names the
// file and the key (issue 15: out-of-range sizes, wrong JSON types, bad eps, bad rope_parameters).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "biofm/core/error.h"
#include "biofm/io/atomic_file.h"
#include "biofm/models/esm2/config.h"
#include "biofm/models/llama/config.h"

using namespace biofm;
using json = nlohmann::json;

namespace {

std::string fixture(const std::string& rel) { return read_file(std::string(BIOFM_SOURCE_DIR) + "/tests/fixtures/" + rel); }

// The message of the biofm::Error that parse(text) throws ("" when it does not throw).
template <class F>
std::string error_of(F parse, const std::string& text) {
  try {
    parse(text, "dir/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_rejected(const std::string& base, const char* key, const json& value, const std::string& needle,
                     bool llama) {
  json j = json::parse(base);
  j[key] = value;
  const std::string msg = llama ? error_of(llama_config_from_hf_json, j.dump()) : error_of(esm2_config_from_hf_json, j.dump());
  EXPECT_NE(msg.find("dir/config.json"), std::string::npos) << key << "=" << value << ": " << msg;
  EXPECT_NE(msg.find(needle), std::string::npos) << key << "=" << value << ": " << msg;
}

}  // namespace

TEST(HfConfigValidation, EsmOutOfRangeSizesAndWrongTypes) {
  const std::string base = fixture("esm2_tiny/config.json");
  ASSERT_EQ(error_of(esm2_config_from_hf_json, base), "");
  for (const char* k : {"max_position_embeddings", "hidden_size", "num_hidden_layers", "num_attention_heads",
                        "intermediate_size"}) {
    expect_rejected(base, k, INT64_MIN, k, false);
    expect_rejected(base, k, -1, k, false);
    expect_rejected(base, k, 0, k, false);
    expect_rejected(base, k, UINT64_MAX, k, false);
    expect_rejected(base, k, int64_t(1) << 40, k, false);
    expect_rejected(base, k, "12", k, false);
    expect_rejected(base, k, 1.5, k, false);
  }
  expect_rejected(base, "token_dropout", "yes", "token_dropout", false);
  expect_rejected(base, "layer_norm_eps", -1e-5, "layer_norm_eps", false);
  expect_rejected(base, "layer_norm_eps", 0.0, "layer_norm_eps", false);
  expect_rejected(base, "layer_norm_eps", "1e-5", "layer_norm_eps", false);
  expect_rejected(base, "model_type", 7, "model_type", false);
  expect_rejected(base, "hidden_act", json::array(), "hidden_act", false);
  expect_rejected(base, "mask_token_id", 99, "token id", false);
  expect_rejected(base, "hidden_dropout_prob", "0", "hidden_dropout_prob", false);
  EXPECT_NE(error_of(esm2_config_from_hf_json, "[1, 2]").find("JSON object"), std::string::npos);
  EXPECT_NE(error_of(esm2_config_from_hf_json, "\"esm\"").find("JSON object"), std::string::npos);
}

TEST(HfConfigValidation, LlamaOutOfRangeSizesWrongTypesAndRope) {
  const std::string base = fixture("llama_tiny/config.json");
  ASSERT_EQ(error_of(llama_config_from_hf_json, base), "");
  ASSERT_EQ(error_of(llama_config_from_hf_json, fixture("llama_tiny/config.legacy.json")), "");
  for (const char* k : {"max_position_embeddings", "hidden_size", "num_hidden_layers", "num_attention_heads",
                        "intermediate_size", "vocab_size"}) {
    expect_rejected(base, k, INT64_MIN, k, true);
    expect_rejected(base, k, 0, k, true);
    expect_rejected(base, k, int64_t(1) << 40, k, true);
    expect_rejected(base, k, true, k, true);
  }
  expect_rejected(base, "head_dim", -2, "head_dim", true);
  expect_rejected(base, "rms_norm_eps", -1e-6, "rms_norm_eps", true);
  expect_rejected(base, "tie_word_embeddings", "no", "tie_word_embeddings", true);
  expect_rejected(base, "bos_token_id", -1, "bos_token_id", true);
  expect_rejected(base, "eos_token_id", json::array(), "eos_token_id", true);
  expect_rejected(base, "eos_token_id", json::array({"x"}), "eos_token_id", true);
  expect_rejected(base, "attention_bias", "false", "attention_bias", true);
  // Malformed rope_parameters are errors, never ignored.
  expect_rejected(base, "rope_parameters", json::array({1, 2}), "rope_parameters", true);
  expect_rejected(base, "rope_parameters", "llama3", "rope_parameters", true);
  expect_rejected(base, "rope_parameters", {{"rope_type", 3}}, "rope_parameters.rope_type", true);
  expect_rejected(base, "rope_parameters", {{"rope_theta", -1.0}}, "rope_parameters.rope_theta", true);
  expect_rejected(base, "rope_parameters", {{"rope_type", "llama3"}, {"factor", 8}}, "low_freq_factor", true);
  expect_rejected(base, "rope_parameters",
                  {{"rope_type", "llama3"}, {"factor", "8"}, {"low_freq_factor", 1}, {"high_freq_factor", 4}},
                  "rope_parameters.factor", true);
  expect_rejected(base, "rope_scaling", 3, "rope_scaling", true);
}

TEST(HfConfigValidation, LimitsKeepParameterCountsInRange) {
  // The largest accepted sizes give a parameter count that neither overflows nor goes negative.
  json j = json::parse(fixture("esm2_tiny/config.json"));
  j["hidden_size"] = 1 << 16;
  j["num_attention_heads"] = 1 << 8;
  j["intermediate_size"] = 1 << 20;
  j["num_hidden_layers"] = 1 << 12;
  const Esm2Config c = esm2_config_from_hf_json(j.dump(), "big.json");
  EXPECT_GT(c.num_parameters(), int64_t(1) << 40);
}
