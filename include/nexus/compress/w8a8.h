// W8A8 calibration (`nexus quantize IN OUT W8A8 --calib TEXT`): the static int8 scale of each
// weight matrix's input activations, from the float model run over a calibration text.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "nexus/model.h"
#include "nexus/status.h"
#include "nexus/tokenizer.h"

namespace nexus {

// How a matrix's input range is taken from the calibration activations: their largest magnitude
// (minmax), or the given percentile of the magnitudes (values above it are clipped at run time).
enum class CalibMethod { kMinMax, kPercentile };
// "minmax" or "percentile"; nullopt otherwise.
std::optional<CalibMethod> parse_calib_method(std::string_view name);

struct W8A8CalibOptions {
  CalibMethod method = CalibMethod::kMinMax;
  double percentile = 99.99;  // in (0, 100], for kPercentile
  int64_t n_ctx = 128;        // tokens per chunk (the first is the BOS where the model has one)
  int64_t chunks = 16;        // at most this many chunks (-1: the whole text)
  int n_threads = 1;
};

// Runs the model over `text` in chunks and returns, per weight matrix name, the activation scale
// range / 127 (range: the method's magnitude over every value its input took; a matrix whose
// inputs were all zero gets no entry). The percentile is read from a histogram of 32 bins per power
// of two, rounded up to its bin's upper edge (at most 3.2% above the exact value) and never above
// the largest magnitude. `progress(done, total)` after each chunk. Errors: a text shorter than
// one chunk, a bad chunk size or percentile.
Result<std::map<std::string, float>> calibrate_w8a8(
    const Model& model, const Tokenizer& tok, std::string_view text, const W8A8CalibOptions& o,
    const std::function<void(int64_t, int64_t)>& progress);

// The range a method takes from the magnitudes |x| of `values` (exposed for tests): their maximum,
// or the percentile as calibrate_w8a8 computes it.
float w8a8_calib_range(const float* values, int64_t n, CalibMethod method, double percentile);

}  // namespace nexus
