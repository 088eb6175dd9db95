// Multi-process training runs from a test: the tiny ESM-2 of the distributed tests, `biofm
// launch` on a free port, and the comparisons of two runs' curves and final models.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "biofm/io/safetensors.h"
#include "e2e/cli_run.h"
#include "free_port.h"

namespace biofm::testkit {

inline int next_port() { return biofm::testkit::free_port(); }

// A tiny ESM-2 on the bundled sample (fp32 CPU), one log record per step.
inline std::string tiny_args(const std::string& out, int steps, int grad_acc) {
  return "train --config-dir " + src("configs") + " --config-name esm2_sanity output_dir=" + out +
         " dataset.path=" + src("data/proteins_sample.fasta") + " dataset.val_path=" + src("data/proteins_val.fasta") +
         " dataset.val_every_n_steps=3 dataset.val_max_batches=4" +
         " model.config.hidden_size=32 model.config.num_hidden_layers=2 model.config.num_attention_heads=4"
         " model.config.intermediate_size=64 dataset.max_seq_length=128 dataset.max_tokens_per_batch=512"
         " logger.frequency=1 checkpoint.save_every_n_steps=3 checkpoint.max_checkpoints=5 num_threads=1"
         " scheduler.warmup_steps=2 grad_acc_steps=" +
         std::to_string(grad_acc) + " num_train_steps=" + std::to_string(steps);
}

inline std::string launch(int nproc) {
  return "launch --nproc-per-node " + std::to_string(nproc) + " --master 127.0.0.1:" + std::to_string(next_port()) + " ";
}

inline std::vector<nlohmann::json> train_records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json r = nlohmann::json::parse(line);
    if (r.contains("loss")) out.push_back(r);
  }
  return out;
}

inline void expect_same_curve(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b, size_t from = 0) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = from; i < a.size(); ++i) {
    for (const char* k : {"loss", "grad_norm"}) {
      const double x = a[i][k].get<double>(), y = b[i][k].get<double>();
      EXPECT_LE(std::abs(x - y), 1e-5 * std::abs(y)) << k << " at step " << a[i]["step"] << ": " << x << " vs " << y;
    }
    if (a[i].contains("val_loss") || b[i].contains("val_loss")) {
      const double x = a[i]["val_loss"].get<double>(), y = b[i]["val_loss"].get<double>();
      EXPECT_LE(std::abs(x - y), 1e-5 * std::abs(y)) << "val_loss at step " << a[i]["step"];
    }
  }
}

// Every tensor of two safetensors files within 1e-5 relative to the tensor's largest value.
inline void expect_same_tensors(const std::string& a, const std::string& b) {
  const biofm::SafetensorsFile x = biofm::read_safetensors(a), y = biofm::read_safetensors(b);
  ASSERT_EQ(x.tensors.size(), y.tensors.size());
  for (const auto& [name, t] : x.tensors) {
    ASSERT_TRUE(y.tensors.count(name)) << name;
    const biofm::Tensor u = t.to(biofm::DType::F32), v = y.tensors.at(name).to(biofm::DType::F32);
    ASSERT_EQ(u.numel(), v.numel()) << name;
    double diff = 0, scale = 1e-12;
    for (int64_t i = 0; i < u.numel(); ++i) {
      diff = std::max(diff, double(std::abs(u.f32()[i] - v.f32()[i])));
      scale = std::max(scale, double(std::abs(v.f32()[i])));
    }
    EXPECT_LE(diff, 1e-5 * scale + 1e-6) << name;  // (+ absolute: key biases get no gradient, stay ~1e-8)
  }
}

}  // namespace biofm::testkit
