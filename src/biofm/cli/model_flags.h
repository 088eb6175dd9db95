// What the model commands (embed, eval, generate) share beyond flag parsing: --device,
// loading a model directory, and the reader flags --format / --column.
#pragma once
#include <memory>
#include <string>

#include "biofm/cli/flags.h"
#include "biofm/core/dtype.h"
#include "biofm/data/reader.h"
#include "biofm/models/registry.h"

namespace biofm {

// --device cpu|cuda (cuda only when a GPU is usable).
Device parse_device(const std::string& s);
// family.load(dir, dev) with an allocation failure (a config.json whose sizes pass the
// limits but do not fit in memory) reported as a biofm::Error naming the directory.
std::unique_ptr<LanguageModel> load_model(const ModelFamily& family, const std::string& dir, Device dev);
// --format and --column, for commands that read sequence files.
ReaderOptions reader_options(const Flags& f);

}  // namespace biofm
