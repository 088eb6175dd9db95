// The data pipeline in one include: readers, dataset, tokenizers, sample order, batchers.
// See docs/DATA.md for formats, the sample order, masking and the batch layout.
#pragma once
#include "biofm/data/batch.h"
#include "biofm/data/causal.h"
#include "biofm/data/dataset.h"
#include "biofm/data/input_files.h"
#include "biofm/data/mlm.h"
#include "biofm/data/pack.h"
#include "biofm/data/reader.h"
#include "biofm/data/sampler.h"
#include "biofm/data/stream.h"
#include "biofm/data/tokenizer.h"
