// End-to-end: the front door — exit codes and --help, an installed biofm run from elsewhere,
// the TensorBoard files and metrics keys of a run, and `biofm report` in a real browser.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "e2e/cli_run.h"

namespace fs = std::filesystem;

namespace {

using biofm::testkit::RunResult;
using biofm::testkit::sh;
using biofm::testkit::src;
using biofm::testkit::run_biofm;
std::string fresh_dir(const std::string& name) { return biofm::testkit::fresh_dir("frontdoor_" + name); }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Small enough for seconds on two cores.
const std::string kTiny =
    " model.config.hidden_size=32 model.config.num_hidden_layers=1 model.config.num_attention_heads=4"
    " model.config.intermediate_size=64 dataset.max_seq_length=128 dataset.max_tokens_per_batch=512"
    " scheduler.warmup_steps=2 checkpoint.save_final_model=false checkpoint.save_every_n_steps=0";

std::string data_args() {
  return " dataset.path=" + src("data/proteins_sample.fasta") + " dataset.val_path=" + src("data/proteins_val.fasta");
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// Pixels of one exact RGB color in an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium's
// --screenshot writes).
size_t count_color_pixels(const std::string& png, uint8_t r, uint8_t g, uint8_t b) {
  EXPECT_EQ(png.compare(0, 8, "\x89PNG\r\n\x1a\n"), 0);
  auto be32 = [&](size_t at) {
    return uint32_t(uint8_t(png[at])) << 24 | uint32_t(uint8_t(png[at + 1])) << 16 | uint32_t(uint8_t(png[at + 2])) << 8 |
           uint32_t(uint8_t(png[at + 3]));
  };
  uint32_t w = 0, h = 0;
  int channels = 0;
  std::string idat;
  for (size_t at = 8; at + 8 <= png.size();) {
    const uint32_t len = be32(at);
    const std::string type = png.substr(at + 4, 4);
    if (type == "IHDR") {
      w = be32(at + 8), h = be32(at + 12);
      EXPECT_EQ(png[at + 16], 8) << "bit depth";
      channels = png[at + 17] == 2 ? 3 : png[at + 17] == 6 ? 4 : 0;
      EXPECT_EQ(png[at + 20], 0) << "interlaced";
    }
    if (type == "IDAT") idat += png.substr(at + 8, len);
    at += 12 + len;
  }
  EXPECT_GT(channels, 0);
  if (!channels) return 0;
  const size_t stride = size_t(w) * channels;
  std::vector<uint8_t> raw((stride + 1) * h);
  uLongf raw_len = raw.size();
  EXPECT_EQ(uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()), Z_OK);
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  size_t n = 0;
  for (uint32_t y = 0; y < h; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= size_t(channels) ? cur[i - channels] : 0, up = prev[i],
                c = i >= size_t(channels) ? prev[i - channels] : 0;
      int pred = 0;
      if (filter == 1) pred = a;
      if (filter == 2) pred = up;
      if (filter == 3) pred = (a + up) / 2;
      if (filter == 4) {
        const int p = a + up - c, pa = std::abs(p - a), pb = std::abs(p - up), pc = std::abs(p - c);
        pred = pa <= pb && pa <= pc ? a : pb <= pc ? up : c;
      }
      cur[i] = uint8_t(in[i] + pred);
    }
    for (size_t x = 0; x < w; ++x)
      n += cur[x * channels] == r && cur[x * channels + 1] == g && cur[x * channels + 2] == b;
    std::swap(prev, cur);
  }
  return n;
}

}  // namespace

TEST(FrontDoor, VersionHelpAndExitCodes) {
  RunResult v = run_biofm("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.output, std::string("biofm ") + BIOFM_VERSION + "\n");
  EXPECT_EQ(run_biofm("--help").code, 0);
  EXPECT_EQ(run_biofm("").code, 2);
  EXPECT_EQ(run_biofm("trian").code, 2);                                  // unknown command
  RunResult bad_flag = run_biofm("train --config-nmae esm2_sanity");
  EXPECT_EQ(bad_flag.code, 2) << bad_flag.output;
  EXPECT_NE(bad_flag.output.find("did you mean '--config-name'"), std::string::npos) << bad_flag.output;
  EXPECT_EQ(run_biofm("train").code, 2);                                  // missing --config-name
  EXPECT_EQ(run_biofm("train --config-name").code, 2);                    // missing value
  EXPECT_EQ(run_biofm("report").code, 2);                                 // missing RUN_DIR
  EXPECT_EQ(run_biofm("bench --steps x --shape 8M").code, 2);             // not an integer
  EXPECT_EQ(run_biofm("info --verbose").code, 2);
  EXPECT_EQ(run_biofm("train --config-name no_such_config").code, 1);     // runtime error
  EXPECT_EQ(run_biofm("train --config-name esm2_sanity num_train_steps=-3").code, 2);  // a bad override
  EXPECT_EQ(run_biofm("report /nonexistent/run").code, 1);
  // The model commands: the same rules (cli/flags.h).
  RunResult bad_embed = run_biofm("embed --modle m --input x --output y");
  EXPECT_EQ(bad_embed.code, 2) << bad_embed.output;
  EXPECT_NE(bad_embed.output.find("did you mean '--model'"), std::string::npos) << bad_embed.output;
  EXPECT_EQ(run_biofm("embed --input x --output y").code, 2);              // missing --model
  EXPECT_EQ(run_biofm("eval --model m --input").code, 2);                  // missing value
  EXPECT_EQ(run_biofm("eval --model m --input a.fasta b.fasta").code, 2);  // unquoted glob
  EXPECT_EQ(run_biofm("generate --model " + src("tests/fixtures/llama_tiny") + " --prompt ACGT --top-k x").code, 2);
  EXPECT_EQ(run_biofm("generate --model m --prompt ACGT --no-cache=1").code, 2);
  // --precision: a value it does not take is a usage error; fp8 is not one generate takes.
  const std::string esm = src("tests/fixtures/esm2_tiny");
  RunResult fp16 = run_biofm("embed --model " + esm + " --input x --output y --precision fp16");
  EXPECT_EQ(fp16.code, 2) << fp16.output;
  EXPECT_NE(fp16.output.find("--precision must be bf16, fp8 or fp32"), std::string::npos) << fp16.output;
  RunResult gen_fp8 = run_biofm("generate --model " + src("tests/fixtures/llama_tiny") + " --prompt ACGT --precision fp8");
  EXPECT_EQ(gen_fp8.code, 2) << gen_fp8.output;
  EXPECT_NE(gen_fp8.output.find("generate takes bf16 or fp32"), std::string::npos) << gen_fp8.output;
  EXPECT_EQ(run_biofm("generate --help").output.find("fp8"), std::string::npos) << "generate --help offers fp8";
  RunResult hidden = run_biofm("eval --help");
  EXPECT_EQ(hidden.output.find("--dump-logits"), std::string::npos) << "a hidden flag in --help";
  // --help of each command lists every flag its table declares.
  const std::map<std::string, std::vector<std::string>> flags = {
      {"train", {"--config-name", "--config-dir", "--print-config"}},
      {"bench", {"--model", "--shape", "--data", "--steps", "--recompute-layers", "--fp8", "--json"}},
      {"report", {"--output"}},
      {"info", {}},
      {"embed", {"--model", "--input", "--output", "--per-token", "--logits", "--device", "--max-tokens",
                 "--max-seq-length", "--format", "--column"}},
      {"eval", {"--model", "--input", "--output", "--device", "--max-tokens", "--max-seq-length", "--seed",
                "--stride", "--format", "--column"}},
      {"generate", {"--model", "--prompt", "--max-new-tokens", "--temperature", "--top-k", "--seed",
                    "--num-samples", "--device", "--no-cache", "--ignore-eos"}},
  };
  for (const auto& [cmd, names] : flags) {
    RunResult h = run_biofm(cmd + " --help");
    EXPECT_EQ(h.code, 0) << cmd;
    EXPECT_EQ(h.output.rfind("usage: biofm " + cmd, 0), 0u) << h.output;
    for (const auto& f : names) EXPECT_NE(h.output.find(f), std::string::npos) << cmd << " " << f;
  }
}

// `cmake --install` into a fresh prefix, then the installed binary trains from another
// directory with the shipped configs, and with a user config composed on top of them.
TEST(FrontDoor, InstalledBinaryTrainsFromAnotherDirectory) {
  const std::string prefix = fresh_dir("prefix"), work = fresh_dir("work");
  const std::string build_dir = fs::path(BIOFM_BINARY).parent_path().string();
  RunResult inst = sh("cmake --install '" + build_dir + "' --prefix '" + prefix + "'");
  ASSERT_EQ(inst.code, 0) << inst.output;
  const std::string exe = prefix + "/bin/biofm";
  ASSERT_TRUE(fs::exists(exe));
  EXPECT_TRUE(fs::exists(prefix + "/share/biofm/configs/esm2_sanity.yaml"));
  EXPECT_TRUE(fs::exists(prefix + "/share/biofm/configs/esm2_base.yaml"));
  EXPECT_TRUE(fs::exists(prefix + "/share/biofm/data/proteins_sample.fasta"));
  EXPECT_FALSE(fs::exists(prefix + "/share/biofm/data/bad"));
  // The guides that --help names (docs/INFERENCE.md, ...), without the measurement evidence.
  EXPECT_TRUE(fs::exists(prefix + "/share/doc/biofm/docs/INFERENCE.md"));
  EXPECT_TRUE(fs::exists(prefix + "/share/doc/biofm/docs/DATA.md"));
  EXPECT_FALSE(fs::exists(prefix + "/share/doc/biofm/docs/evidence"));
  // The metrics converters the README names, executable.
  for (const char* tool : {"metrics_to_wandb.py", "read_tfevents.py"}) {
    const fs::path p = prefix + "/share/biofm/tools/" + tool;
    EXPECT_TRUE(fs::exists(p)) << p;
    EXPECT_NE(fs::status(p).permissions() & fs::perms::owner_exec, fs::perms::none) << p;
  }

  const std::string in_work = "cd '" + work + "' && ";
  RunResult info = sh(in_work + exe + " info");
  ASSERT_EQ(info.code, 0) << info.output;
  EXPECT_NE(info.output.find("config search path: " + prefix + "/share/biofm/configs"), std::string::npos)
      << info.output;

  // No dataset.path given: the shipped config's data/proteins_sample.fasta is not in the work
  // directory, so it is taken from the installed tree (cli/config_search.h), and the saved
  // config says which file was read.
  RunResult t = sh(in_work + exe + " train --config-name esm2_sanity num_train_steps=2 logger.frequency=1" +
                   " output_dir=run1" + kTiny);
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_TRUE(fs::exists(work + "/run1/metrics.jsonl"));
  // (kTiny's 2 warmup steps are the whole run: said at the start)
  EXPECT_NE(t.output.find("note: scheduler.warmup_steps=2 >= num_train_steps=2: the learning rate stays in warmup for "
                          "the whole run (at most 50% of optimizer.lr); lower scheduler.warmup_steps"),
            std::string::npos) << t.output;
  const std::string saved1 = read_text(work + "/run1/config.yaml");
  EXPECT_NE(saved1.find(prefix + "/share/biofm/data/proteins_sample.fasta"), std::string::npos) << saved1;
  EXPECT_NE(saved1.find(prefix + "/share/biofm/data/proteins_val.fasta"), std::string::npos) << saved1;
  // ... and where the config came from, with the command line's overrides.
  EXPECT_NE(saved1.find("# loaded from: " + prefix + "/share/biofm/configs/esm2_sanity.yaml\n# overrides: "
                        "num_train_steps=2 logger.frequency=1 output_dir=run1 model.config.hidden_size=32"),
            std::string::npos) << saved1;
  // A ./configs/esm2_sanity.yaml comes after the installed configs on the search path: loading
  // says it is not used, and how to put it first (the installed and the source tree's copies
  // are the same file: neither is named).
  fs::create_directories(work + "/configs");
  std::ofstream(work + "/configs/esm2_sanity.yaml") << "defaults: [esm2_base]\nnum_train_steps: 5\n";
  RunResult shadowed = sh(in_work + exe + " train --config-name esm2_sanity --print-config");
  ASSERT_EQ(shadowed.code, 0) << shadowed.output;
  EXPECT_NE(shadowed.output.find("note: config 'esm2_sanity' is " + prefix + "/share/biofm/configs/esm2_sanity.yaml, "
                                 "the first on the config search path; configs/esm2_sanity.yaml is not used "
                                 "(--config-dir DIR puts DIR first)"),
            std::string::npos) << shadowed.output;
  fs::remove_all(work + "/configs");
  // A file of the work directory by that name comes first.
  fs::create_directories(work + "/data");
  fs::copy_file(src("data/proteins_val.fasta"), work + "/data/proteins_val.fasta");
  RunResult local = sh(in_work + exe + " train --config-name esm2_sanity --print-config");
  ASSERT_EQ(local.code, 0) << local.output;
  EXPECT_NE(local.output.find("val_path: data/proteins_val.fasta"), std::string::npos) << local.output;
  EXPECT_NE(local.output.find("path: " + prefix + "/share/biofm/data/proteins_sample.fasta"), std::string::npos)
      << local.output;
  // A relative path found nowhere fails, naming both places tried.
  RunResult gone = sh(in_work + exe + " train --config-name esm2_sanity dataset.path=data/no_such.fasta");
  EXPECT_EQ(gone.code, 1) << gone.output;
  EXPECT_NE(gone.output.find("dataset.path: cannot find 'data/no_such.fasta'"), std::string::npos) << gone.output;
  EXPECT_NE(gone.output.find(work + "/data/no_such.fasta (from the current directory)"), std::string::npos)
      << gone.output;
  EXPECT_NE(gone.output.find(prefix + "/share/biofm/data/no_such.fasta (biofm's shipped tree)"), std::string::npos)
      << gone.output;

  // A user's config in its own directory, composed on a shipped one.
  const std::string user = fresh_dir("userconf");
  std::ofstream(user + "/mine.yaml") << "defaults: [esm2_sanity]\nnum_train_steps: 3\nseed: 7\n";
  RunResult u = sh(in_work + exe + " train --config-dir '" + user + "' --config-name mine output_dir=run2" +
                   " logger.frequency=1" + kTiny);
  ASSERT_EQ(u.code, 0) << u.output;
  const std::string saved = read_text(work + "/run2/config.yaml");
  EXPECT_NE(saved.find("num_train_steps: 3"), std::string::npos) << saved;
  EXPECT_NE(saved.find("seed: 7"), std::string::npos) << saved;
  EXPECT_NE(saved.find("hidden_size: 32"), std::string::npos) << saved;  // the override
  EXPECT_NE(saved.find("warmup_steps: 2"), std::string::npos) << saved;
  // A user config shadows a shipped one of the same name.
  std::ofstream(user + "/esm2_sanity.yaml") << "defaults: [esm2_base]\nnum_train_steps: 5\n";
  RunResult p = sh(in_work + exe + " train --config-dir '" + user + "' --config-name esm2_sanity --print-config");
  ASSERT_EQ(p.code, 0) << p.output;
  EXPECT_NE(p.output.find("num_train_steps: 5"), std::string::npos);
  EXPECT_NE(p.output.find("hidden_size: 320"), std::string::npos);  // esm2_base's, not esm2_sanity's 128
  RunResult missing = sh(in_work + exe + " train --config-dir '" + user + "' --config-name nope");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.output.find("mine"), std::string::npos) << missing.output;  // lists the union
  EXPECT_EQ(missing.output.find("biofm_configs_"), std::string::npos) << missing.output;
  // A mistake inside a user's file names that file where it is.
  std::ofstream(user + "/typo.yaml") << "defaults: [esm2_sanity]\nnum_train_stepz: 3\n";
  RunResult typo = sh(in_work + exe + " train --config-dir '" + user + "' --config-name typo");
  EXPECT_EQ(typo.code, 1) << typo.output;
  EXPECT_NE(typo.output.find(user + "/typo.yaml:2"), std::string::npos) << typo.output;
  EXPECT_EQ(typo.output.find("biofm_configs_"), std::string::npos) << typo.output;
}

// A run writes the recipe keys, timestamps and TensorBoard files; biofm report turns two runs
// into a page that Chromium loads and draws.
TEST(FrontDoor, RunMetricsTensorBoardAndReportInABrowser) {
  const std::string dir = fresh_dir("report");
  const std::string common = " logger.frequency=2 dataset.val_every_n_steps=4 num_train_steps=8" + data_args() + kTiny;
  RunResult a = run_biofm("train --config-name esm2_sanity output_dir=" + dir + "/run_a" + common);
  ASSERT_EQ(a.code, 0) << a.output;
  RunResult b = run_biofm("train --config-name esm2_sanity optimizer.lr=1e-3 logger.tensorboard=false output_dir=" +
                      dir + "/run_b" + common);
  ASSERT_EQ(b.code, 0) << b.output;

  std::ifstream in(dir + "/run_a/metrics.jsonl");
  std::string line;
  int train = 0, val = 0;
  double prev_wall = 0;
  while (std::getline(in, line)) {
    const auto r = nlohmann::json::parse(line);
    EXPECT_EQ(r["timestamp"].get<std::string>().size(), 24u) << line;  // 2026-11-23T02:48:41.123Z
    EXPECT_GE(r["wall_time"].get<double>(), prev_wall);
    prev_wall = r["wall_time"].get<double>();
    if (r.contains("loss")) {
      ++train;
      EXPECT_EQ(r["train/loss"], r["loss"]);
      EXPECT_EQ(r["train/learning_rate"], r["lr"]);
      for (const char* k : {"train/grad_norm", "train/unpadded_tokens_per_second_per_gpu",
                            "train/tokens_per_second_per_gpu", "train/mfu"})
        EXPECT_TRUE(r.contains(k)) << k;
    }
    if (r.contains("val_loss")) {
      ++val;
      EXPECT_EQ(r["val/loss"], r["val_loss"]);
    }
  }
  EXPECT_EQ(train, 4);
  EXPECT_EQ(val, 2);
  size_t tb_files = 0;
  for (const auto& e : fs::directory_iterator(dir + "/run_a/tensorboard"))
    tb_files += e.path().filename().string().rfind("events.out.tfevents.", 0) == 0 && fs::file_size(e.path()) > 100;
  EXPECT_EQ(tb_files, 1u);
  EXPECT_FALSE(fs::exists(dir + "/run_b/tensorboard"));

  const std::string html_path = dir + "/report.html";
  RunResult rep = run_biofm("report " + dir + "/run_a " + dir + "/run_b --output " + html_path);
  ASSERT_EQ(rep.code, 0) << rep.output;
  const std::string html = read_text(html_path);
  EXPECT_EQ(count(html, "<path class=\"series\""), 16u);  // 8 charts with data x 2 runs

  // The page in a real browser: the DOM Chromium built holds the plotted paths, and a
  // screenshot shows them (pixels of the first run's color, against a copy without paths).
  if (sh("command -v chromium").code != 0)
    FAIL() << "chromium is not installed (tools/install_deps.sh installs it); the browser check cannot run";
  const std::string chrome = "chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,2400 ";
  RunResult dom = sh(chrome + "--dump-dom file://" + html_path + " 2>/dev/null");
  ASSERT_EQ(dom.code, 0) << dom.output;
  EXPECT_NE(dom.output.find("<title>biofm report</title>"), std::string::npos);
  EXPECT_EQ(count(dom.output, "<path class=\"series\""), 16u);
  EXPECT_EQ(count(dom.output, "data-run=\"run_b\""), 8u);

  std::string bare = html;
  for (size_t p; (p = bare.find("<path class=\"series\"")) != std::string::npos;)
    bare.erase(p, bare.find("/>", p) + 2 - p);
  std::ofstream(dir + "/bare.html") << bare;
  ASSERT_EQ(sh(chrome + "--screenshot=" + dir + "/full.png file://" + html_path).code, 0);
  ASSERT_EQ(sh(chrome + "--screenshot=" + dir + "/bare.png file://" + dir + "/bare.html").code, 0);
  const size_t with_paths = count_color_pixels(read_text(dir + "/full.png"), 0x1f, 0x77, 0xb4);
  const size_t without = count_color_pixels(read_text(dir + "/bare.png"), 0x1f, 0x77, 0xb4);
  std::printf("series-colored pixels: %zu with paths, %zu without\n", with_paths, without);
  EXPECT_GT(with_paths, without + 1000) << "with paths " << with_paths << ", without " << without;
}

// bench takes device and precision from a --config-name config and its key=value overrides,
// unless --device / --precision are given; its banner and JSON say what runs (the CPU: fp32).
TEST(FrontDoor, BenchTakesDeviceAndPrecisionFromTheConfig) {
  const std::string dir = fresh_dir("bench_config");
  const std::string common = "bench --config-dir " + src("configs") + " --config-name esm2_sanity --steps 1 --warmup 0 --data " +
                             src("data/proteins_sample.fasta") + kTiny;
  auto json_of = [](const std::string& path) { return nlohmann::json::parse(read_text(path)); };
  // esm2_sanity says device: cpu, precision: fp32.
  RunResult r = run_biofm(common + " --json " + dir + "/a.json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find(" on cpu (fp32), "), std::string::npos) << r.output;
  EXPECT_EQ(json_of(dir + "/a.json").at("device"), "cpu");
  EXPECT_EQ(json_of(dir + "/a.json").at("precision"), "fp32");
  // The flags win over the overrides; the CPU says that it computes in fp32.
  r = run_biofm(common + " device=cuda precision=bf16-mixed --device cpu --json " + dir + "/b.json");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("on cpu (fp32; precision=bf16-mixed is for CUDA), "), std::string::npos) << r.output;
  EXPECT_EQ(json_of(dir + "/b.json").at("precision"), "fp32");
  r = run_biofm(common + " precision=bf16-mixed --precision fp32");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("on cpu (fp32), "), std::string::npos) << r.output;
  // A shape's defaults (cuda, bf16-mixed) give way to an override as well.
  r = run_biofm("bench --shape 8M device=cpu --steps 1 --warmup 0 --tokens-per-batch 512 --max-seq-length 256 --data " +
                src("data/proteins_sample.fasta"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("on cpu (fp32; precision=bf16-mixed is for CUDA), "), std::string::npos) << r.output;
}

// bench says which recipe each layer ran (the banner's FP8 format alone does not), in its output
// and its JSON.
TEST(FrontDoor, BenchNamesThePrecisionOfEachLayer) {
  const std::string out = fresh_dir("bench") + "/bench.json";
  RunResult r = run_biofm("bench --model esm2 --shape 8M --device cpu --steps 1 --warmup 0 --tokens-per-batch 512 --max-seq-length 256 --data " +
                          src("data/proteins_sample.fasta") + " --json " + out +
                          " --fp8 fp8_config.fp8_recipe=Float8BlockScaling 'fp8_layers=[1,2]'");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("precision by layer: layers 1-2: fp8 Float8BlockScaling, layers 3-6: fp32"), std::string::npos)
      << r.output;
  std::ifstream f(out);
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j.at("precision_by_layer"), "layers 1-2: fp8 Float8BlockScaling, layers 3-6: fp32");
}

// bench on the CPU: MFU (a fraction of the GPU's peak), device memory and the second CUDA stream
// are not measured there: null in the JSON, n/a in the line (not 0.0 or false).
TEST(FrontDoor, BenchOnTheCpuLeavesTheGpuFiguresOut) {
  const std::string out = fresh_dir("bench_cpu") + "/bench.json";
  RunResult r = run_biofm("bench --shape 8M --device cpu --steps 1 --warmup 0 --tokens-per-batch 512 --max-seq-length 256 "
                          "--json " + out);  // (no --data: the config's dataset.path, as --help says)
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("| MFU n/a | peak n/a\n"), std::string::npos) << r.output;
  std::ifstream f(out);
  const nlohmann::json j = nlohmann::json::parse(f);
  for (const char* key : {"mfu_seed", "mfu_6n", "peak_mem_gib", "peak_reserved_gib", "wgrad_stream"})
    EXPECT_TRUE(j.at(key).is_null()) << key << ": " << j.at(key);
  EXPECT_TRUE(j.at("adamw_ahead").is_boolean());  // (the CPU applies AdamW one layer ahead as well)
  // --data is optional in the help too; without a GPU, the error says how to bench on the CPU.
  EXPECT_NE(run_biofm("bench --help").output.find("--shape 8M|35M|150M|650M|3B|15B|1B|7B [--data FILE]"), std::string::npos);
  r = run_biofm("bench --shape 8M --steps 1 --warmup 0");
  if (r.output.find("no CUDA device available") == std::string::npos) GTEST_SKIP() << "a GPU is here: " << r.output;
  EXPECT_NE(r.output.find("biofm bench: error: no CUDA device available; use --device cpu"), std::string::npos) << r.output;
}

// embed --output DIR resumes by what it read, not where: the model and the input moved elsewhere
// (another mount point, a renamed run directory) are the same run; another model written over
// the same directory is not (its shards would be mixed with the first model's).
TEST(FrontDoor, EmbedResumeFollowsTheContentNotThePaths) {
  const std::string d = fresh_dir("embed_moved");
  fs::create_directories(d + "/a");
  fs::copy(src("tests/fixtures/esm2_tiny"), d + "/a/model", fs::copy_options::recursive);
  {
    std::ifstream in(src("data/proteins_val.fasta"));
    std::ofstream out(d + "/a/in.fasta");
    std::string line;
    for (int records = 0; std::getline(in, line);) {
      if (!line.empty() && line[0] == '>' && ++records > 24) break;
      out << line << "\n";
    }
  }
  const std::string env = "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE OMP_NUM_THREADS=1 ";
  auto embed = [&](const std::string& where) {
    return sh(env + BIOFM_BINARY + " embed --model " + d + "/" + where + "/model --input " + d + "/" + where +
              "/in.fasta --device cpu --output " + d + "/out --shard-size 8");
  };
  RunResult first = embed("a");
  ASSERT_EQ(first.code, 0) << first.output;
  const std::string gone = d + "/out/shard-00001.safetensors";
  fs::remove(gone);
  fs::rename(d + "/a", d + "/b");
  RunResult moved = embed("b");
  ASSERT_EQ(moved.code, 0) << moved.output;
  EXPECT_NE(moved.output.find("16 records from complete shards"), std::string::npos) << moved.output;
  EXPECT_TRUE(fs::exists(gone));
  // Another model in the same place (the last bytes of its weights changed) is refused.
  fs::remove(gone);
  {
    std::fstream w(d + "/b/model/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    w.seekp(-4, std::ios::end);
    w.write("\x01\x02\x03\x04", 4);
  }
  RunResult other = embed("b");
  EXPECT_EQ(other.code, 1) << other.output;
  EXPECT_NE(other.output.find("different command"), std::string::npos) << other.output;
  EXPECT_FALSE(fs::exists(gone));
}
