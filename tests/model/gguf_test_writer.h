#pragma once
// The GGUF writer of src/model/gguf_writer.h under the names the tests use (files go to a fuzz::TempDir,
// the temporary folder of fuzz/fuzz_util.h).
#include "fuzz_util.h"
#include "model/gguf_writer.h"  // (src/model: this folder has no header of that name)

namespace ember::test {

using TempFolder = fuzz::TempDir;
using model::f32_bytes;
using model::f64_bytes;
using model::gguf_str;
using model::GgufWriter;
using model::le;

}  // namespace ember::test
