// What the model commands (embed, eval, score, generate) share beyond flag parsing: --device,
// --precision, loading a model directory, and the reader flags --format / --column.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "biofm/cli/flags.h"
#include "biofm/core/dtype.h"
#include "biofm/core/precision.h"
#include "biofm/data/dataset.h"
#include "biofm/data/reader.h"
#include "biofm/data/tokenizer.h"
#include "biofm/infer/input.h"
#include "biofm/models/registry.h"

namespace biofm {

// The value parsers of the flags below throw UsageError (exit 2) for a value the flag never
// takes, and biofm::Error (exit 1) for one that this machine or model cannot honour.
//
// --device auto|cpu|cuda|cuda:N. auto = the GPU when one is usable, else the CPU; cuda:N makes
// GPU N current (an error naming the count when there is no such GPU).
Device parse_device(const std::string& s);
// What an inference command computes in (--precision).
//   fp32  fp32 weights, activations and math (the reference numbers)
//   bf16  pure bf16 weights and activations, fp32 accumulation: training's bf16 path
//   fp8   bf16 as above, except that the transformer layers' projections run as FP8 GEMMs
//         (E4M3 codes, per-tensor current scaling: training's fp8_config recipe); faster on
//         Hopper, further from the fp32 numbers than bf16
struct InferencePrecision {
  Precision params = Precision::F32;  // how the weights are held
  bool fp8 = false;
  const char* name() const { return fp8 ? "fp8" : precision_name(params); }
};
// --precision on `dev`: default (empty) = bf16 on CUDA, fp32 on the CPU; bf16 and fp8 on the
// CPU are errors (the CPU backend computes in fp32), and so is fp8 on a GPU without FP8 tensor
// cores; a value outside bf16|fp8|fp32 is a usage error.
InferencePrecision parse_inference_precision(const std::string& s, Device dev);
// The flags every inference command declares the same way.
FlagSpec device_flag();     // --device
FlagSpec precision_flag(bool with_fp8 = true);  // --precision (generate: without fp8)
// --ops KEY=VALUE[,KEY=VALUE...]: the training configs' ops.* keys (ops/options.h) for this run,
// e.g. --ops sdpa_autotune=true,gemm_fused_gelu=false; checked as the configs check them (an
// unknown key names the nearest one). A key outside ops.* is a usage error.
FlagSpec ops_flag();
void apply_ops_flag(const Flags& f);
// A command that runs in one process (score, eval, generate) refuses to be one of several
// ranks (biofm launch, torchrun, srun): each would do the whole job into the same output. A
// usage error naming the launcher.
void require_one_process(const char* command);
// family.load(dir, dev) for inference (the gradient buffer is released: forward passes only),
// with an allocation failure (a config.json whose sizes pass the
// limits but do not fit in memory) reported as a biofm::Error naming the directory.
// With p.fp8 every transformer layer's projections run in FP8 (set_layer_quant).
std::unique_ptr<LanguageModel> load_model(const ModelFamily& family, const std::string& dir, Device dev,
                                          InferencePrecision p = {});
// --layers "33,-1" against a model of L layers: 0 = the embedding output, L = the final states,
// negatives from the end (-1 = L); duplicates dropped, order kept. An entry that is not an
// integer is a usage error; a layer the model does not have, a runtime error.
std::vector<int> parse_layers(const std::string& s, int L);
// The same for layer numbers already parsed; a layer the model lacks is an error naming `what`.
std::vector<int> resolve_layers(const std::vector<int64_t>& layers, int L, const std::string& what);
// --format and --column, for commands that read sequence files (a --format the readers do not
// know is a usage error).
ReaderOptions reader_options(const Flags& f);
// --family NAME: a registered model family (models/registry.h); another name is a usage error.
const ModelFamily& parse_family(const std::string& name);
FlagSpec split_flag();  // --split, of a prepared --input
// A causal model's windows from --window N (eval also takes its older name, --max-seq-length)
// and --stride N: the window defaults to the model's context (max_pos), the stride to 200 bases,
// or (window - 2) / 2 (half the bases a window holds) if fewer. A stride that leaves a window no
// new base is a usage error.
struct WindowFlags {
  int64_t window = 0, stride = 0;
  const char* flag = "--window";  // the flag that set the window
};
WindowFlags window_flags(const Flags& a, int64_t max_pos);
// --uppercase-labels true|false (eval, score: causal models): whether a/c/g/t targets are scored
// as A/C/G/T. Default: what training recorded in the model directory (models/uppercase_labels.h),
// else false. Another value is a usage error. `source` says where the value came from.
struct UppercaseLabels {
  bool value = false;
  std::string source;  // "--uppercase-labels", "the model's config.json" or "the default"
};
FlagSpec uppercase_labels_flag();
UppercaseLabels uppercase_labels(const Flags& a, const std::string& model_dir);
// One line when lowercase a/c/g/t bases were seen (`lowercase`) and are not scored as A/C/G/T;
// "" otherwise.
std::string lowercase_note(uint64_t lowercase, const UppercaseLabels& u);
// Output flags (e.g. --output, --track) that name one of --input's files, or the same file as
// each other, are usage errors before any work: the output, renamed into place when complete,
// would replace the data it was read from (or two writers would share one temporary file).
// Paths compare after std::filesystem::weakly_canonical.
void check_output_paths(const Flags& a, const std::vector<const char*>& output_flags);
FlagSpec format_flag();  // --format, of sequence files (every format the readers know)
// --column and --name-column, of the inference commands' table inputs
FlagSpec column_flag();
FlagSpec name_column_flag();
// A note (stderr) for --column / --name-column given where no input has columns: FASTA or text
// files only, or a `biofm prepare` directory. They are ignored there.
void note_unused_column_flags(const Flags& f, const std::string& input);
// --input as those commands read it, as a stream (infer/input.h: read a piece at a time, never
// whole): files (reader_options), or a `biofm prepare` directory (its --split, default train),
// whose tokenizer must be `tok`'s. keep_empty: empty records are read too (ReaderOptions), for the
// commands that write a row per input record.
infer::InputStream open_input(const Flags& f, const std::string& input, const Tokenizer& tok, bool keep_empty = false);

}  // namespace biofm
