#pragma once
// A person's decoding options (CLI flags, the library's ember::SamplingOptions) laid over a model's
// defaults: one rule for every front end.
#include "ember/sampling_options.h"
#include "sampling/generation_config.h"

namespace ember::sampling {

// `base` (from generation_config.json) with the options set in `o`; validated (throws ember::Error
// naming the first bad option).
SamplingParams apply(SamplingParams base, const SamplingOptions& o);

}  // namespace ember::sampling
