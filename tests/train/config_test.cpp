// TrainConfig: the typed training config, its schema, and the files under configs/.
#include "biofm/train/config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "biofm/core/error.h"
#include "biofm/io/config.h"
#include "biofm/models/registry.h"
#include "biofm/train/setup.h"

using namespace biofm;
namespace fs = std::filesystem;

namespace {

const std::string kConfigs = std::string(BIOFM_SOURCE_DIR) + "/configs";

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "message: " << (haystack)

TrainConfig minimal(const std::vector<std::string>& overrides = {}) {
  return load_train_config_string("dataset:\n  path: x.fasta\n", overrides);
}

}  // namespace

TEST(ConfigTrain, DefaultsFollowTheEsm2Recipe) {
  TrainConfig c = minimal();
  TrainConfig expect;
  expect.dataset.path = "x.fasta";
  EXPECT_EQ(c, expect);
  EXPECT_EQ(c.seed, 42);
  EXPECT_EQ(c.device, Device::CPU);
  EXPECT_EQ(c.num_train_steps, 1000);
  EXPECT_EQ(c.precision, Precision::F32);
  EXPECT_EQ(c.model.family, "esm2");
  EXPECT_EQ(c.model.config.hidden_size, 320);
  EXPECT_EQ(c.model.config.max_position_embeddings, 1026);
  EXPECT_EQ(c.model.config.hidden_act, "gelu");
  EXPECT_EQ(c.model.config.kv_heads(), 20);
  EXPECT_EQ(c.model.config.head_dim(), 16);
  EXPECT_DOUBLE_EQ(c.model.config.embedding_std(), 0.02);
  EXPECT_EQ(c.dataset.packing, BatchMode::Thd);
  EXPECT_EQ(c.dataset.max_seq_length, 1024);
  EXPECT_DOUBLE_EQ(c.dataset.mlm_probability, 0.15);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 4e-4);
  EXPECT_EQ(c.optimizer.betas, (std::vector<double>{0.9, 0.98}));
  EXPECT_DOUBLE_EQ(c.optimizer.eps, 1e-8);
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.01);
  EXPECT_EQ(c.scheduler.type, "warmup_linear");
  EXPECT_EQ(c.scheduler.warmup_steps, 2000);
  EXPECT_DOUBLE_EQ(c.scheduler.decay_fraction, 0.9);
  EXPECT_DOUBLE_EQ(c.scheduler.min_lr_ratio, 0.1);
  EXPECT_DOUBLE_EQ(c.clip_grad_norm, 1.0);
  EXPECT_EQ(c.checkpoint.save_every_n_steps, 1000);
  EXPECT_EQ(c.checkpoint.max_checkpoints, 5);
  EXPECT_TRUE(c.checkpoint.resume_from_checkpoint);
  EXPECT_TRUE(c.checkpoint.save_final_model);
  EXPECT_EQ(c.resolved_ckpt_dir(), "runs/default/checkpoints");
  EXPECT_EQ(c.metrics_path(), "runs/default/metrics.jsonl");
  EXPECT_FALSE(c.quant_stats_config.enabled);  // the recipes' defaults
  EXPECT_FALSE(c.fp8_config.quantized_model_init_kwargs.enabled);
  // Every schema key is a field and vice versa, and the schema defaults are the struct's.
  EXPECT_EQ(train_config_from(config::Config(train_config_schema())), TrainConfig{});
  EXPECT_EQ(train_config_schema().keys().size(), 133u);
}

TEST(ConfigTrain, EveryConfigFileLoadsAndValidates) {
  auto names = config::list_configs(kConfigs);
  ASSERT_FALSE(names.empty());
  size_t count = 0;
  for (const auto& entry : fs::directory_iterator(kConfigs)) {
    if (entry.path().extension() != ".yaml" && entry.path().extension() != ".yml") continue;
    std::string name = entry.path().stem().string();
    SCOPED_TRACE(name);
    TrainConfig c;
    ASSERT_NO_THROW(c = load_train_config(kConfigs, name)) << error_of([&] {
      load_train_config(kConfigs, name);
    });
    EXPECT_EQ(load_train_config_string(to_yaml(c)), c);
    ++count;
  }
  EXPECT_EQ(count, names.size());
  EXPECT_GE(count, 8u);
}

TEST(ConfigTrain, SanityConfigComposesOnTheBase) {
  TrainConfig c = load_train_config(kConfigs, "esm2_sanity");
  EXPECT_EQ(c.model.family, "esm2");
  EXPECT_EQ(c.model.config.hidden_size, 128);
  EXPECT_EQ(c.model.config.num_hidden_layers, 4);
  EXPECT_EQ(c.model.config.num_attention_heads, 4);
  EXPECT_EQ(c.model.config.intermediate_size, 512);
  EXPECT_EQ(c.model.config.vocab_size, 33);  // from esm2_base
  EXPECT_EQ(c.dataset.path, "data/proteins_sample.fasta");
  EXPECT_EQ(c.dataset.val_path, "data/proteins_val.fasta");
  EXPECT_EQ(c.dataset.max_seq_length, 256);
  EXPECT_EQ(c.dataset.max_tokens_per_batch, 4096);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 2e-3);
  EXPECT_EQ(c.optimizer.betas, (std::vector<double>{0.9, 0.98}));  // from esm2_base
  EXPECT_EQ(c.scheduler.warmup_steps, 30);
  EXPECT_EQ(c.num_train_steps, 300);
  EXPECT_EQ(c.checkpoint.save_every_n_steps, 100);
  EXPECT_EQ(c.checkpoint.max_checkpoints, 2);
  EXPECT_EQ(c.logger.frequency, 10);
  EXPECT_EQ(c.output_dir, "runs/esm2_sanity");
}

TEST(ConfigTrain, PublishedEsm2Shapes) {
  struct Shape {
    const char* name;
    int layers, hidden, heads, ffn;
  };
  for (Shape s : {Shape{"esm2_t6_8M", 6, 320, 20, 1280}, Shape{"esm2_t12_35M", 12, 480, 20, 1920},
                  Shape{"esm2_t30_150M", 30, 640, 20, 2560},
                  Shape{"esm2_t33_650M", 33, 1280, 20, 5120},
                  Shape{"esm2_t36_3B", 36, 2560, 40, 10240},
                  Shape{"esm2_t48_15B", 48, 5120, 40, 20480}}) {
    SCOPED_TRACE(s.name);
    TrainConfig c = load_train_config(kConfigs, s.name);
    EXPECT_EQ(c.model.config.num_hidden_layers, s.layers);
    EXPECT_EQ(c.model.config.hidden_size, s.hidden);
    EXPECT_EQ(c.model.config.num_attention_heads, s.heads);
    EXPECT_EQ(c.model.config.intermediate_size, s.ffn);
    EXPECT_EQ(c.model.config.vocab_size, 33);
    EXPECT_EQ(c.dataset.packing, BatchMode::Thd);
    EXPECT_EQ(c.dataset.max_seq_length, 1024);
    EXPECT_DOUBLE_EQ(c.optimizer.lr, 4e-4);
  }
}

TEST(ConfigTrain, OverridesReachTypedFields) {
  TrainConfig c = load_train_config(
      kConfigs, "esm2_sanity",
      {"optimizer.lr=1e-3", "optimizer.betas=[0.9,0.95]", "model.config.hidden_size=256",
       "precision=bf16-mixed", "device=cuda", "scheduler.type=warmup_cosine",
       "dataset.packing=bshd", "dataset.format=jsonl", "dataset.path=data/x.jsonl",
       "checkpoint.ckpt_dir=/tmp/ck", "logger.metrics_file=/abs/m.jsonl", "num_train_steps=5_000",
       "model.config.rope_theta=500000"});
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 1e-3);
  EXPECT_EQ(c.optimizer.betas, (std::vector<double>{0.9, 0.95}));
  EXPECT_EQ(c.model.config.hidden_size, 256);
  EXPECT_EQ(c.precision, Precision::Bf16Mixed);
  EXPECT_EQ(c.device, Device::CUDA);
  EXPECT_EQ(c.scheduler.type, "warmup_cosine");
  EXPECT_EQ(c.dataset.packing, BatchMode::Bshd);
  EXPECT_EQ(c.dataset.format, "jsonl");
  EXPECT_EQ(c.dataset.path, "data/x.jsonl");
  EXPECT_EQ(c.num_train_steps, 5000);
  EXPECT_DOUBLE_EQ(c.model.config.rope_theta, 500000.0);
  EXPECT_EQ(c.resolved_ckpt_dir(), "/tmp/ck");
  EXPECT_EQ(c.metrics_path(), "/abs/m.jsonl");
}

TEST(ConfigTrain, UnknownKeysSuggestTheNearest) {
  std::string msg = error_of([] {
    load_train_config(kConfigs, "esm2_sanity", {"optimizer.learning_rate=1e-3"});
  });
  EXPECT_HAS(msg, "unknown config key 'optimizer.learning_rate'; did you mean 'optimizer.lr'?");
  // BioNeMo recipe spellings point at ours.
  auto s = [](const std::string& k) { return train_config_schema().suggest(k); };
  EXPECT_EQ(s("adamw_kwargs.lr"), "optimizer.lr");
  EXPECT_EQ(s("adamw_kwargs.weight_decay"), "optimizer.weight_decay");
  EXPECT_EQ(s("lr_scheduler_kwargs.num_warmup_steps"), "scheduler.warmup_steps");
  EXPECT_EQ(s("lr_scheduler_kwargs.num_training_steps"), "num_train_steps");
  EXPECT_EQ(s("use_sequence_packing"), "dataset.packing");
  EXPECT_EQ(s("model_tag"), "model.init_from");
  EXPECT_EQ(s("dataset.micro_batch_sise"), "dataset.micro_batch_size");
  EXPECT_EQ(s("model.config.num_layers"), "model.config.num_hidden_layers");
  EXPECT_EQ(s("model.hidden_size"), "model.config.hidden_size");
  EXPECT_EQ(s("checkpoint.save_every"), "checkpoint.save_every_n_steps");
  EXPECT_EQ(s("logger.frequncy"), "logger.frequency");
  EXPECT_EQ(s("scheduler.warmup"), "scheduler.warmup_steps");
  EXPECT_EQ(s("optimizer.beta"), "optimizer.betas");

  msg = error_of([] {
    load_train_config_string("dataset:\n  path: x\n  max_seq_len: 10\n");
  });
  EXPECT_HAS(msg, "unknown config key 'dataset.max_seq_len'; did you mean 'dataset.max_seq_length'?");
  EXPECT_HAS(msg, "<string>:3");
}

TEST(ConfigTrain, BadValuesNameKeyAndExpectation) {
  EXPECT_HAS(error_of([] { minimal({"precision=fp16"}); }),
             "config key 'precision' must be one of fp32, bf16, bf16-mixed; got 'fp16'");
  EXPECT_HAS(error_of([] { minimal({"device=gpu"}); }),
             "config key 'device' must be one of cpu, cuda; got 'gpu'");
  EXPECT_HAS(error_of([] { minimal({"model.family=bert"}); }), "must be one of esm2, llama");
  EXPECT_HAS(error_of([] { minimal({"optimizer.lr=0"}); }), "config key 'optimizer.lr' must be > 0");
  EXPECT_HAS(error_of([] { minimal({"optimizer.betas=[0.9,1.5]"}); }),
             "config key 'optimizer.betas' needs every element in [0, 1)");
  EXPECT_HAS(error_of([] { minimal({"num_train_steps=0"}); }),
             "config key 'num_train_steps' must be > 0; got 0");
  EXPECT_HAS(error_of([] { minimal({"grad_acc_steps=0"}); }), "config key 'grad_acc_steps' must be");
  EXPECT_HAS(error_of([] { minimal({"model.config.hidden_size=big"}); }),
             "config key 'model.config.hidden_size' expects an int; got 'big'");
  EXPECT_HAS(error_of([] { minimal({"model.config.hidden_size=99999999999"}); }),
             "config key 'model.config.hidden_size' must be");
  EXPECT_HAS(error_of([] { minimal({"dataset.shuffle=sometimes"}); }),
             "config key 'dataset.shuffle' expects a bool");
  EXPECT_HAS(error_of([] { minimal({"scheduler.min_lr_ratio=2"}); }),
             "config key 'scheduler.min_lr_ratio' must be in [0, 1]; got 2.0");
  EXPECT_HAS(error_of([] { minimal({"model.config.rope_scaling_type=yarn"}); }),
             "must be one of \"\", llama3");
}

TEST(ConfigTrain, CrossKeyChecksNameTheKeys) {
  EXPECT_HAS(error_of([] { minimal({"model.config.hidden_size=330"}); }),
             "model.config.hidden_size (330) must be divisible by "
             "model.config.num_attention_heads (20)");
  EXPECT_HAS(error_of([] { minimal({"model.config.hidden_size=60"}); }),
             "must be even for rotary");
  EXPECT_HAS(error_of([] { load_train_config_string("seed: 1\n"); }), "dataset.path is empty");
  EXPECT_HAS(error_of([] { minimal({"dataset.max_tokens_per_batch=512"}); }),
             "dataset.max_tokens_per_batch (512) must be at least dataset.max_seq_length (1024)");
  minimal({"dataset.max_tokens_per_batch=512", "dataset.packing=bshd"});  // fine when padded
  EXPECT_HAS(error_of([] { minimal({"dataset.val_every_n_steps=10"}); }),
             "dataset.val_every_n_steps is 10 but dataset.val_path is empty");
  EXPECT_HAS(error_of([] { minimal({"model.config.num_key_value_heads=4"}); }),
             "ESM-2 has no grouped-query attention");
  EXPECT_HAS(error_of([] { minimal({"model.config.tie_word_embeddings=false"}); }),
             "model.config.tie_word_embeddings must be true for model.family esm2");
  EXPECT_HAS(error_of([] { minimal({"model.family=llama"}); }),
             "model.config.hidden_act 'gelu' does not fit model.family llama");
  // Several problems come together.
  std::string msg = error_of([] {
    load_train_config_string("model:\n  config:\n    hidden_size: 330\n",
                             {"dataset.val_every_n_steps=5"});
  });
  EXPECT_HAS(msg, "3 problems");
  // warmup longer than training is allowed.
  EXPECT_NO_THROW(minimal({"scheduler.warmup_steps=5000", "num_train_steps=10"}));
  // A hand-built struct is checked the same way.
  TrainConfig bad;
  bad.dataset.path = "x";
  bad.optimizer.lr = -1;
  EXPECT_HAS(error_of([&] { check_train_config(bad); }), "config key 'optimizer.lr' must be > 0");
  bad.optimizer.lr = 1e-3;
  bad.model.family = "gpt";
  EXPECT_HAS(error_of([&] { check_train_config(bad); }),
             "config key 'model.family' must be one of esm2, llama; got gpt");
}

TEST(ConfigTrain, LlamaConfigFromString) {
  const char* yaml = R"(
num_train_steps: 100
precision: bf16-mixed
model:
  family: llama
  config:
    hidden_size: 4096
    num_hidden_layers: 32
    num_attention_heads: 32
    num_key_value_heads: 8
    intermediate_size: 14336
    vocab_size: 256
    max_position_embeddings: 8192
    rope_theta: 500000
    tie_word_embeddings: false
    hidden_act: silu
    rope_scaling_type: llama3
    embedding_init_std: 1.0
    scaled_init: true
dataset:
  path: data/dna.fasta
  max_seq_length: 8192
  uppercase_labels: true
optimizer:
  lr: 3e-5
  betas: [0.9, 0.95]
  weight_decay: 0.1
  no_decay_on_1d_and_embeddings: true
scheduler:
  type: warmup_cosine
  warmup_steps: 2500
  min_lr_ratio: 0.02
)";
  TrainConfig c = load_train_config_string(yaml);
  EXPECT_EQ(c.model.family, "llama");
  EXPECT_EQ(c.model.config.kv_heads(), 8);
  EXPECT_EQ(c.model.config.head_dim(), 128);
  EXPECT_EQ(c.model.config.rope_scaling_type, "llama3");
  EXPECT_DOUBLE_EQ(c.model.config.embedding_std(), 1.0);
  EXPECT_TRUE(c.model.config.scaled_init);
  EXPECT_EQ(c.scheduler.type, "warmup_cosine");
  EXPECT_EQ(load_train_config_string(to_yaml(c)), c);
  EXPECT_HAS(error_of([&] { load_train_config_string(yaml, {"dataset.stride=9000"}); }),
             "dataset.stride (9000) must lie in [0, dataset.max_seq_length - 2 = 8190)");
  EXPECT_HAS(error_of([&] { load_train_config_string(yaml, {"dataset.stride=8190"}); }),
             "dataset.stride (8190) must lie in [0, dataset.max_seq_length - 2 = 8190)");
  EXPECT_HAS(error_of([&] { load_train_config_string(yaml, {"dataset.max_seq_length=2"}); }),
             "dataset.max_seq_length");
  EXPECT_HAS(error_of([&] {
               load_train_config_string(yaml, {"model.config.high_freq_factor=0.5"});
             }),
             "model.config.high_freq_factor (0.5) must be greater than");
}

TEST(ConfigTrain, ToYamlRoundTripsEveryField) {
  TrainConfig c;
  c.seed = 7;
  c.device = Device::CUDA;
  c.num_train_steps = 123;
  c.grad_acc_steps = 4;
  c.clip_grad_norm = 0.0;
  c.precision = Precision::Bf16;
  c.num_threads = 3;
  c.output_dir = "out dir/with: colon";
  c.recompute = true;
  c.model.init_from = "/models/esm2";
  c.model.config.hidden_size = 64;
  c.model.config.num_attention_heads = 4;
  c.model.config.layer_norm_eps = 1e-12;
  c.model.config.initializer_range = 0.1 + 0.2;  // not a short decimal
  c.model.config.token_dropout = false;
  c.dataset.path = "data/p.csv.gz";
  c.dataset.format = "csv";
  c.dataset.column = "seq";
  c.dataset.max_seq_length = 100;
  c.dataset.mlm_probability = 0.2;
  c.dataset.packing = BatchMode::Bshd;
  c.dataset.shuffle = false;
  c.dataset.val_path = "v.fasta";
  c.dataset.val_every_n_steps = 9;
  c.optimizer.betas = {0.85, 0.999};
  c.optimizer.no_decay_on_1d_and_embeddings = true;
  c.scheduler.type = "constant";
  c.checkpoint.ckpt_dir = "ck";
  c.checkpoint.resume_from_checkpoint = false;
  c.logger.metrics_file = "";
  std::string y = to_yaml(c, "biofm resolved config");
  EXPECT_EQ(y.rfind("# biofm resolved config\nseed: 7\ndevice: cuda\n", 0), 0u) << y;
  EXPECT_HAS(y, "\nmodel:\n  family: esm2\n  init_from: /models/esm2\n  config:\n    hidden_size: 64\n");
  EXPECT_HAS(y, "  betas: [0.85, 0.999]\n");
  EXPECT_HAS(y, "  rope_scaling_type: \"\"\n");
  TrainConfig back = load_train_config_string(y);
  EXPECT_EQ(back, c);
  EXPECT_EQ(to_yaml(back, "biofm resolved config"), y);
}

TEST(ConfigTrain, MissingConfigNameListsAvailable) {
  std::string msg = error_of([] { load_train_config(kConfigs, "esm2_sanityy"); });
  EXPECT_HAS(msg, "config 'esm2_sanityy' not found");
  EXPECT_HAS(msg, "did you mean 'esm2_sanity'?");
  EXPECT_HAS(msg, "available configs: ");
  EXPECT_HAS(msg, "esm2_base");
  EXPECT_HAS(msg, "esm2_t33_650M");
}

// fp8_config: off by default; HYBRID / E4M3 formats; FP8 on CUDA needs bf16 compute.
TEST(ConfigTrain, Fp8ConfigSelectsTheRecipe) {
  EXPECT_FALSE(fp8_recipe_for(minimal(), Device::CPU).has_value());
  auto hybrid = fp8_recipe_for(minimal({"fp8_config.enabled=true"}), Device::CPU);
  ASSERT_TRUE(hybrid.has_value());
  EXPECT_EQ(hybrid->fwd, ops::Fp8Type::E4M3);
  EXPECT_EQ(hybrid->bwd, ops::Fp8Type::E5M2);
  auto e4m3 = fp8_recipe_for(minimal({"fp8_config.enabled=true", "fp8_config.fp8_format=E4M3"}), Device::CPU);
  ASSERT_TRUE(e4m3.has_value());
  EXPECT_EQ(e4m3->bwd, ops::Fp8Type::E4M3);
  EXPECT_HAS(error_of([] { fp8_recipe_for(minimal({"fp8_config.enabled=true", "precision=fp32"}), Device::CUDA); }),
             "needs precision bf16-mixed or bf16");
  EXPECT_TRUE(fp8_recipe_for(minimal({"fp8_config.enabled=true", "precision=bf16-mixed"}), Device::CUDA).has_value());
  EXPECT_HAS(error_of([] { minimal({"fp8_config.fp8_format=E5M2"}); }), "fp8_config.fp8_format");
  EXPECT_HAS(error_of([] { minimal({"fp8_config.enable=true"}); }), "fp8_config.enabled");
}

// The recipes' FP8 statistics switch and model-init kwargs, as their hydra configs write them
// (esm2_native_te / opengenome2 defaults.yaml: quant_stats_config; the older llama3_native_te:
// fp8_stats_config and fp8_config.fp8_model_init_kwargs).
TEST(ConfigTrain, RecipeQuantStatsKeysAreAcceptedAsWritten) {
  const std::string dir = testing::TempDir() + "/quant_stats_cfg";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string recipe_yaml =
      "dataset:\n  path: x.fasta\n"
      "fp8_config:\n  enabled: false\n  fp8_recipe: transformer_engine.common.recipe.DelayedScaling\n"
      "  fp8_format: \"HYBRID\"\n  fp8_recipe_kwargs: {}\n  quantized_model_init_kwargs:\n    enabled: false\n"
      "quant_stats_config:\n  enabled: false\n  quant_stats_file: ./fp8_debugging_stats.yaml\n"
      "  quant_log_dir: ./log_quant_stats\n  log_to_wandb: false\n";
  TrainConfig c = load_train_config_string(recipe_yaml);
  EXPECT_FALSE(c.quant_stats_config.enabled);
  EXPECT_EQ(c.quant_stats_config.quant_log_dir, "./log_quant_stats");
  EXPECT_EQ(fp8_stats_interval(c), 0);  // off, as in the recipes' defaults
  EXPECT_EQ(load_train_config_string(to_yaml(c)), c);
  const std::string llama_yaml =
      "dataset:\n  path: x.fasta\n"
      "fp8_config:\n  fp8_model_init_kwargs:\n    enabled: false\n"
      "fp8_stats_config:\n  enabled: true\n  fp8_stats_file: ./fp8_debugging_stats.yaml\n"
      "  fp8_log_dir: ./log_fp8_stats\n";
  TrainConfig l = load_train_config_string(llama_yaml, {"output_dir=/runs/a"});
  EXPECT_TRUE(l.fp8_stats_config.enabled);
  EXPECT_EQ(l.quant_stats_path(3), "/runs/a/log_fp8_stats/rank_3/quant_stats.jsonl");
  EXPECT_EQ(minimal().quant_stats_path(0), "");  // by default the statistics go to the metrics only
  EXPECT_EQ(minimal({"quant_stats_config.quant_log_dir=/abs/q"}).quant_stats_path(1), "/abs/q/rank_1/quant_stats.jsonl");

  // Interval: stats_interval wins; else enabled takes the file's LogFp8TensorStats freq, or 10.
  std::string note;
  EXPECT_EQ(fp8_stats_interval(minimal({"fp8_config.stats_interval=3", "quant_stats_config.enabled=true"}), &note), 3);
  EXPECT_EQ(note, "");
  EXPECT_EQ(fp8_stats_interval(minimal({"quant_stats_config.enabled=true"}), &note), kDefaultQuantStatsInterval);
  EXPECT_EQ(kDefaultQuantStatsInterval, 10);
  EXPECT_HAS(note, "every 10 steps");
  EXPECT_EQ(fp8_stats_interval(minimal({"quant_stats_config.enabled=true",
                                        "quant_stats_config.quant_stats_file=" + dir + "/missing.yaml"}),
                               &note),
            10);
  EXPECT_HAS(note, "does not exist");
  // The recipes' fp8_debugging_stats.yaml (LogFp8TensorStats every 10 steps, LogTensorStats every
  // step: the latter is not ours), with freq 4 and one tensor at 6.
  {
    std::ofstream f(dir + "/stats.yaml");
    f << "example_fp8_tensor_stat_collection:\n    enabled: True\n    layers:\n"
         "        layer_types: [layernorm_qkv, proj, fc1, fc2]\n    transformer_engine:\n"
         "        LogFp8TensorStats:\n            enabled: True\n            tensors_struct:\n"
         "            - tensor: activation\n              stats: [underflows%, scale_inv_min]\n              freq: 6\n"
         "            - tensor: gradient\n              stats: [underflows%]\n              freq: 4\n"
         "        LogTensorStats:\n          enabled: True\n          stats: [max, min]\n"
         "          tensors: [dgrad, wgrad, fprop]\n          freq: 1\n";
  }
  EXPECT_EQ(fp8_stats_interval(minimal({"quant_stats_config.enabled=true",
                                        "quant_stats_config.quant_stats_file=" + dir + "/stats.yaml"}),
                               &note),
            4);
  EXPECT_HAS(note, "LogFp8TensorStats freq");
  EXPECT_EQ(fp8_stats_interval(minimal({"fp8_stats_config.enabled=true",
                                        "fp8_stats_config.fp8_stats_file=" + dir + "/stats.yaml"})),
            4);
  {
    std::ofstream f(dir + "/off.yaml");  // the FP8 feature switched off: the default interval
    f << "s:\n  enabled: true\n  transformer_engine:\n    LogFp8TensorStats:\n      enabled: false\n      freq: 2\n";
  }
  EXPECT_EQ(fp8_stats_interval(minimal({"quant_stats_config.enabled=true",
                                        "quant_stats_config.quant_stats_file=" + dir + "/off.yaml"})),
            10);
  {
    std::ofstream f(dir + "/bad.yaml");
    f << "s: [unclosed\n";
  }
  EXPECT_HAS(error_of([&] {
               fp8_stats_interval(minimal({"quant_stats_config.enabled=true",
                                           "quant_stats_config.quant_stats_file=" + dir + "/bad.yaml"}));
             }),
             "quant_stats_config.quant_stats_file");

  // What biofm cannot do fails naming the key.
  EXPECT_HAS(error_of([] { minimal({"fp8_config.quantized_model_init_kwargs.enabled=true"}); }),
             "fp8_config.quantized_model_init_kwargs.enabled=true (Transformer Engine's quantized_model_init");
  EXPECT_HAS(error_of([] { minimal({"fp8_config.fp8_model_init_kwargs.enabled=true"}); }),
             "biofm keeps bf16/fp32 weights and quantizes them each step");
  EXPECT_HAS(error_of([] { minimal({"quant_stats_config.log_to_wandb=true"}); }),
             "quant_stats_config.log_to_wandb=true: biofm has no Weights & Biases logger");
  EXPECT_HAS(error_of([] { minimal({"quant_stats_config.quant_log_dir=a", "fp8_stats_config.fp8_log_dir=b"}); }),
             "set one");
}

TEST(ConfigTrain, DatasetPathTakesAListOrACommaSeparatedString) {
  // A YAML list is joined into the comma-separated form the loader splits (data/input_files.h).
  TrainConfig c = load_train_config_string(
      "dataset:\n  path: [data/a.fasta, \"shards/*.jsonl.gz\"]\n  val_path:\n    - v1.fa\n    - v2.fa\n");
  EXPECT_EQ(c.dataset.path, "data/a.fasta,shards/*.jsonl.gz");
  EXPECT_EQ(c.dataset.val_path, "v1.fa,v2.fa");
  EXPECT_EQ(load_train_config_string(to_yaml(c)), c);
  // On the command line: a comma-separated string, or a YAML list.
  EXPECT_EQ(load_train_config_string("seed: 1\n", {"dataset.path=a.fa,b.fa"}).dataset.path, "a.fa,b.fa");
  EXPECT_EQ(load_train_config_string("seed: 1\n", {"dataset.path=[a.fa, dir/]"}).dataset.path, "a.fa,dir/");
  EXPECT_EQ(load_train_config_string("seed: 1\n", {"dataset.format=tsv", "dataset.path=u.tab"}).dataset.format,
            "tsv");
  // Entries holding a comma could not be split back apart; other keys take no list.
  EXPECT_HAS(error_of([] { load_train_config_string("dataset:\n  path: [\"a,b.fa\"]\n"); }),
             "'dataset.path' expects a string or a list of strings without commas");
  EXPECT_HAS(error_of([] { load_train_config_string("dataset:\n  path: x.fa\n  column: [a, b]\n"); }),
             "'dataset.column' expects a string");
}

TEST(ConfigTrain, NcclSymmetricMemoryIsRefusedWhereNoWholeGradientIsReduced) {
  for (const char* s : {"zero2", "fsdp"})
    EXPECT_HAS(error_of([&] { minimal({std::string("distributed.strategy=") + s, "distributed.nccl_symmetric=true"}); }),
               "distributed.nccl_symmetric=true applies to ddp and zero1");
  for (const char* s : {"ddp", "zero1"})
    EXPECT_NO_THROW(minimal({std::string("distributed.strategy=") + s, "distributed.nccl_symmetric=true"}));
}

TEST(ConfigTrain, RangeTimesNeedTheProfilerWindow) {
  EXPECT_HAS(error_of([] { minimal({"profiler.range_times=true"}); }), "profiler.range_times=true times the steps");
  EXPECT_NO_THROW(minimal({"profiler.range_times=true", "profiler.start_step=2", "profiler.end_step=3"}));
}

// The recipes' spellings run as written (config::RecipeSpelling): read as ours, ignored with a
// note, or refused saying what to write; in overrides and in config files alike.
TEST(ConfigTrain, RecipeSpellingsAreReadAsOurs) {
  TrainConfig c = minimal({"use_sequence_packing=false", "dataset.load_dataset_kwargs.path=y.fasta",
                           "adamw_kwargs.lr=1e-3", "adamw_kwargs.betas=[0.9,0.95]",
                           "lr_scheduler_kwargs.num_warmup_steps=7", "validation.data_path=v.fasta", "validation.eval_interval=50",
                           "use_fp32_master_weights=false", "spike_no_more_embedding_init=true"});
  EXPECT_EQ(c.dataset.packing, BatchMode::Bshd);
  EXPECT_EQ(c.dataset.path, "y.fasta");
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 1e-3);
  EXPECT_DOUBLE_EQ(c.optimizer.betas[1], 0.95);
  EXPECT_EQ(c.scheduler.warmup_steps, 7);
  EXPECT_EQ(c.dataset.val_path, "v.fasta");
  EXPECT_EQ(c.dataset.val_every_n_steps, 50);
  EXPECT_EQ(c.precision, Precision::Bf16);
  EXPECT_DOUBLE_EQ(c.model.config.embedding_init_std, 1.0);
  // Later entries win, whichever spelling they use.
  EXPECT_EQ(minimal({"use_sequence_packing=false", "dataset.packing=thd"}).dataset.packing, BatchMode::Thd);
  EXPECT_EQ(minimal({"dataset.packing=thd", "use_sequence_packing=false"}).dataset.packing, BatchMode::Bshd);
  // In a config file too.
  TrainConfig f = load_train_config_string("dataset:\n  path: x.fasta\nuse_sequence_packing: false\nadamw_kwargs:\n  lr: 2.0e-4\n");
  EXPECT_EQ(f.dataset.packing, BatchMode::Bshd);
  EXPECT_DOUBLE_EQ(f.optimizer.lr, 2e-4);
  // A Hydra null (the recipes' "not given") for a key read through a value map leaves ours as it
  // is, with a note, on the command line and in a file (it was refused: "takes true or false").
  EXPECT_EQ(minimal({"use_fp32_master_weights=null"}).precision, minimal().precision);
  EXPECT_EQ(minimal({"precision=bf16", "use_fp32_master_weights=null"}).precision, Precision::Bf16);
  EXPECT_EQ(minimal({"use_fp32_master_weights=~", "use_sequence_packing=null"}), minimal());
  EXPECT_EQ(load_train_config_string("dataset:\n  path: x.fasta\nuse_fp32_master_weights: null\nprecision: bf16\n").precision,
            Precision::Bf16);
  const config::Config nc = config::load_string(train_config_schema(), "{}", {"use_fp32_master_weights=null"});
  ASSERT_EQ(nc.notes().size(), 1u);
  EXPECT_EQ(nc.notes()[0], "ignored: 'use_fp32_master_weights' (override 'use_fp32_master_weights=null'): null is not "
                           "given; precision keeps its value");
  // Keys with no effect here are accepted and change nothing.
  EXPECT_EQ(minimal({"wandb_init_args.project=esm2", "wandb.name=run1", "use_meta_device=true", "hydra.verbose=true"}),
            minimal());
  EXPECT_EQ(load_train_config_string("dataset:\n  path: x.fasta\nwandb_init_args:\n  project: p\n  mode: offline\nwandb: {}\n"),
            minimal());
  // Refused with what to write instead; a value the recipe key does not take is named.
  EXPECT_HAS(error_of([] { minimal({"model_tag=facebook/esm2_t6_8M_UR50D"}); }),
             "'model_tag' is the recipes' key; it names the Hugging Face model");
  EXPECT_HAS(error_of([] { minimal({"use_weight_decay_grouping=true"}); }), "optimizer.no_decay_on_1d_and_embeddings=true");
  EXPECT_HAS(error_of([] { minimal({"use_sequence_packing=maybe"}); }),
             "'use_sequence_packing' (the recipes' name for dataset.packing) takes true or false, got 'maybe'");
  EXPECT_HAS(error_of([] { load_train_config_string("dataset:\n  path: x\nvalidation:\n  enabled: false\n"); }),
             "'validation.enabled' is the recipes' key; biofm validates when dataset.val_path is set");
  // More of the recipes' defaults: read, ignored, or refused with what to write.
  const TrainConfig more = minimal({"lr_scheduler_kwargs.min_lr_ratio=0.1", "config_kwargs.attn_input_format=bshd",
                                    "dataset.buffer_size=77", "dataset.pad_sequences_to_be_divisible_by=8",
                                    "adamw_kwargs.fused=true", "use_te=true", "use_torch_compile=false",
                                    "dataset.num_workers=4", "checkpoint.async_save=false", "log_mfu=true",
                                    "fully_shard_kwargs.reshard_after_forward=true", "dataset.tokenizer_name=x"});
  EXPECT_DOUBLE_EQ(more.scheduler.min_lr_ratio, 0.1);
  EXPECT_EQ(more.dataset.packing, BatchMode::Bshd);
  EXPECT_EQ(more.dataset.shuffle_buffer, 77);
  EXPECT_EQ(more.dataset.pad_to_multiple_of, 8);
  EXPECT_TRUE(more.log_mfu);  // (a key of ours: train/mfu_pct and train/tflops_per_gpu)
  EXPECT_HAS(error_of([] { minimal({"lr_scheduler_kwargs.num_training_steps=100"}); }), "give num_train_steps=N");
  EXPECT_HAS(error_of([] { minimal({"lr_scheduler_kwargs.num_decay_steps=100"}); }), "scheduler.decay_fraction");
  // What the command prints before it runs: every recipe spelling read or ignored, with where it
  // came from (an override, or a config file's line); ours give no note.
  const config::Config oc = config::load_string(
      train_config_schema(), "{}", {"use_sequence_packing=true", "wandb_init_args.project=x", "optimizer.lr=1", "seed=3"});
  const auto& notes = oc.notes();
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], "read 'use_sequence_packing' (override 'use_sequence_packing=true', the recipes' name) as "
                      "dataset.packing=thd");
  EXPECT_HAS(notes[1], "ignored: 'wandb_init_args.project' (override 'wandb_init_args.project=x'): biofm writes metrics.jsonl");
  const config::Config fc = config::load_string(
      train_config_schema(), "dataset:\n  path: x.fasta\nadamw_kwargs:\n  lr: 2.0e-4\nwandb:\n  project: p\n",
      {"use_sequence_packing=true"}, "", "run.yaml");
  ASSERT_EQ(fc.notes().size(), 3u);
  EXPECT_HAS(fc.notes()[0], "read 'adamw_kwargs.lr' (run.yaml");
  EXPECT_HAS(fc.notes()[0], "as optimizer.lr=0.0002");
  EXPECT_HAS(fc.notes()[1], "ignored: 'wandb.project' (run.yaml");
  EXPECT_HAS(fc.notes()[2], "read 'use_sequence_packing' (override 'use_sequence_packing=true'");
}

// Whole numbers in float lists are written as integers, so that a saved config reads as written.
TEST(ConfigTrain, LayerListsAreWrittenAsIntegers) {
  const TrainConfig c = minimal({"fp8_layers=[1,2,5]", "optimizer.betas=[0.9,0.98]"});
  const std::string y = to_yaml(c);
  EXPECT_HAS(y, "fp8_layers: [1, 2, 5]");
  EXPECT_HAS(y, "betas: [0.9, 0.98]");
  EXPECT_EQ(load_train_config_string(y), c);
}

// Layer lists take whole numbers, and say so: [1.5] is refused when parsed (it reached the
// model setup, which then named the wrong layer range), and a bare 1,2 is told the list syntax.
TEST(ConfigTrain, LayerListsTakeWholeNumbers) {
  const std::string half = error_of([] { minimal({"fp8_layers=[1.5]"}); });
  EXPECT_HAS(half, "fp8_layers");
  EXPECT_HAS(half, "a list of whole numbers like [1, 2]");
  const std::string bare = error_of([] { minimal({"fp4_layers=1,2"}); });
  EXPECT_HAS(bare, "a list of whole numbers like [1, 2]");
  EXPECT_EQ(minimal({"fp8_layers=[2, 3]"}).fp8_layers, (std::vector<double>{2, 3}));
  // 1-indexed, each layer once, said in those words (a duplicate reached the model setup).
  EXPECT_HAS(error_of([] { minimal({"fp8_layers=[0]"}); }),
             "config key 'fp8_layers' lists layers 1-indexed (1..num_layers); 0 is not a layer number (in [0])");
  EXPECT_HAS(error_of([] { minimal({"fp4_layers=[-2, 1]"}); }), "-2 is not a layer number (in [-2, 1])");
  EXPECT_HAS(error_of([] { minimal({"fp8_layers=[1,1]"}); }), "config key 'fp8_layers' lists layer 1 twice (in [1, 1])");
  // A layer the model does not have fails when the config loads (--print-config included), not
  // only when the model is built.
  EXPECT_HAS(error_of([] { minimal({"fp8_config.enabled=true", "fp8_layers=[9]"}); }),
             "fp8_layers: layer 9 is not a layer number in [1, 6]");
}

TEST(ConfigTrain, ProfilerEnabledTakesTheRecipesWindow) {
  TrainConfig c = minimal({"profiler.enabled=true"});
  EXPECT_EQ(c.profiler.start_step, 10);
  EXPECT_EQ(c.profiler.end_step, 15);
  c = minimal({"profiler.enabled=true", "profiler.start_step=3", "profiler.end_step=4"});
  EXPECT_EQ(c.profiler.start_step, 3);
  EXPECT_EQ(c.profiler.end_step, 4);
  EXPECT_EQ(minimal().profiler.start_step, -1);
  // false given on the command line, or in the file that sets the window (the recipes' own
  // defaults: enabled false, steps 10-15), turns the window off; a window of biofm's own
  // (start/end without the switch) stays on, and a saved config reads back as it ran.
  EXPECT_EQ(minimal({"profiler.enabled=false", "profiler.start_step=3", "profiler.end_step=4"}).profiler.start_step, -1);
  const TrainConfig recipe = load_train_config_string(
      "dataset:\n  path: x.fasta\nprofiler:\n  enabled: false\n  start_step: 10\n  end_step: 15\n");
  EXPECT_EQ(recipe.profiler.start_step, -1);
  EXPECT_FALSE(recipe.profiler.enabled);
  std::vector<std::string> notes;
  const TrainConfig ours = load_train_config(kConfigs, "esm2_sanity", {"profiler.start_step=3", "profiler.end_step=4"}, &notes);
  EXPECT_EQ(ours.profiler.start_step, 3);
  EXPECT_TRUE(ours.profiler.enabled);
  EXPECT_EQ(load_train_config_string(to_yaml(ours)), ours);
}

// A micro batch size given for packed (thd) batches, which only the token budget shapes, is
// named in a note; the shipped configs' own value (for bshd) is not.
TEST(ConfigTrain, MicroBatchSizeUnderThdIsNoted) {
  std::vector<std::string> notes;
  load_train_config(kConfigs, "esm2_sanity", {"dataset.micro_batch_size=4"}, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_HAS(notes[0], "dataset.micro_batch_size=4 (override 'dataset.micro_batch_size=4') is not used with "
                       "dataset.packing=thd");
  load_train_config(kConfigs, "esm2_sanity", {}, &notes);
  EXPECT_TRUE(notes.empty());
  load_train_config(kConfigs, "esm2_sanity", {"dataset.micro_batch_size=4", "dataset.packing=bshd"}, &notes);
  EXPECT_TRUE(notes.empty());
}

// fp8_dpa without FP8 layers does nothing, and says so.
TEST(ConfigTrain, Fp8AttentionWithoutFp8IsNoted) {
  std::vector<std::string> notes;
  load_train_config(kConfigs, "llama3_sanity", {"fp8_config.fp8_recipe_kwargs.fp8_dpa=true"}, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_HAS(notes[0], "fp8_dpa=true has no effect without fp8_config.enabled=true");
  load_train_config(kConfigs, "llama3_sanity", {"fp8_config.fp8_recipe_kwargs.fp8_dpa=true", "fp8_config.enabled=true"},
                    &notes);
  EXPECT_TRUE(notes.empty());
  // The layer lists likewise.
  load_train_config(kConfigs, "llama3_sanity", {"fp8_layers=[1]", "fp4_layers=[2]"}, &notes);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_HAS(notes[0], "fp8_layers has no effect without fp8_config.enabled=true");
  EXPECT_HAS(notes[1], "fp4_layers has no effect without fp4_config.enabled=true");
}

TEST(ConfigTrain, RecipeConfigNamesRunOrSayWhatToRun) {
  EXPECT_EQ(load_train_config(kConfigs, "og2_7b_thd_gqa"), load_train_config(kConfigs, "og2_7b"));
  EXPECT_EQ(load_train_config(kConfigs, "og2_7b_thd_gqa_fp8"), load_train_config(kConfigs, "og2_7b_fp8"));
  const std::string msg = error_of([] { load_train_config(kConfigs, "L0_sanity"); });
  EXPECT_HAS(msg, "config 'L0_sanity' not found");
  EXPECT_HAS(msg, "the recipes' L0_sanity is --config-name esm2_sanity (ESM-2) or llama3_sanity");
}

// model.init_from loads a directory's model, architecture and all: model.config takes its values
// (a config file's differing keys are named in a note; a command-line override that contradicts
// the directory is an error), so the run's config.yaml describes the model that trains.
TEST(ConfigTrain, InitFromTakesTheDirectorysArchitecture) {
  const std::string esm_dir = std::string(BIOFM_SOURCE_DIR) + "/tests/fixtures/esm2_tiny";
  const std::string llama_dir = std::string(BIOFM_SOURCE_DIR) + "/tests/fixtures/llama_tiny";
  std::set<std::string> given;
  TrainConfig c = load_train_config(kConfigs, "esm2_sanity", {"model.init_from=" + esm_dir}, nullptr, &given);
  EXPECT_EQ(given, (std::set<std::string>{"model.init_from"}));
  EXPECT_EQ(c.model.config.hidden_size, 128);  // esm2_sanity's
  const std::string note = adopt_init_from_architecture(c, given);
  EXPECT_EQ(c.model.config.hidden_size, 64);  // the directory's
  EXPECT_EQ(c.model.config.num_hidden_layers, 2);
  EXPECT_EQ(c.model.config.num_attention_heads, 4);
  EXPECT_EQ(c.model.config.intermediate_size, 128);
  EXPECT_DOUBLE_EQ(c.model.config.layer_norm_eps, 1e-5);  // (the config's spelling of the same float)
  EXPECT_HAS(note, "comes from " + esm_dir + "/config.json");
  EXPECT_HAS(note, "model.config.hidden_size=128 (the directory's: 64)");
  EXPECT_HAS(note, "model.config.num_hidden_layers=4 (the directory's: 2)");
  EXPECT_HAS(note, "model.config.intermediate_size=512 (the directory's: 128)");
  EXPECT_EQ(note.find("num_attention_heads"), std::string::npos) << note;  // (4 in both)
  EXPECT_EQ(note.find("initializer_range"), std::string::npos) << note;    // (init only)
  EXPECT_EQ(adopt_init_from_architecture(c, given), "");  // adopted: nothing differs any more

  // An override that contradicts the directory fails naming it; one that agrees is fine.
  given.clear();
  TrainConfig d = load_train_config(kConfigs, "esm2_sanity",
                                    {"model.init_from=" + esm_dir, "model.config.num_hidden_layers=3"}, nullptr, &given);
  const std::string msg = error_of([&] { adopt_init_from_architecture(d, given); });
  EXPECT_HAS(msg, "model.config.num_hidden_layers=3 (the directory's: 2) contradict");
  EXPECT_EQ(msg.find("hidden_size"), std::string::npos) << msg;  // (from the file: a note, not an error)
  given.clear();
  TrainConfig e = load_train_config(kConfigs, "esm2_sanity",
                                    {"model.init_from=" + esm_dir, "model.config.num_hidden_layers=2"}, nullptr, &given);
  EXPECT_EQ(error_of([&] { adopt_init_from_architecture(e, given); }), "");
  EXPECT_EQ(e.model.config, c.model.config);

  // Llama: GQA and the llama3 rope scaling come from the directory too.
  given.clear();
  TrainConfig l = load_train_config(kConfigs, "llama3_sanity", {"model.init_from=" + llama_dir}, nullptr, &given);
  adopt_init_from_architecture(l, given);
  EXPECT_EQ(l.model.config.hidden_size, 64);
  EXPECT_EQ(l.model.config.kv_heads(), 2);
  EXPECT_EQ(l.model.config.max_position_embeddings, 256);
  EXPECT_EQ(l.model.config.rope_scaling_type, "llama3");
  EXPECT_EQ(l.model.config.original_max_position_embeddings, 64);
  EXPECT_FALSE(l.model.config.tie_word_embeddings);

  // Another family's directory, and no init_from at all.
  TrainConfig wrong = load_train_config(kConfigs, "esm2_sanity", {"model.init_from=" + llama_dir});
  EXPECT_HAS(error_of([&] { adopt_init_from_architecture(wrong, {}); }), "holds a llama model but model.family is esm2");
  TrainConfig none = load_train_config(kConfigs, "esm2_sanity");
  const TrainConfig before = none;
  EXPECT_EQ(adopt_init_from_architecture(none, {}), "");
  EXPECT_EQ(none, before);
}
