// W8A8 static activation scales: a matmul observer keeps, per weight matrix, the largest input
// magnitude and a histogram of the magnitudes while a Context runs the calibration chunks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "compress/calibration.h"
#include "nexus/compress/w8a8.h"
#include "nexus/context.h"
#include "ops/matmul.h"

namespace nexus {
namespace {

// A magnitude's bin: its f32 bits without the sign, shifted so that a bin holds 1/32 of a power
// of two (the exponent and the top five mantissa bits).
constexpr int kShift = 18;
constexpr size_t kBins = size_t{1} << (31 - kShift);

struct Range {
  float amax = 0.0f;
  std::vector<uint64_t> hist = std::vector<uint64_t>(kBins, 0);
  uint64_t count = 0;

  void add(const float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &x[i], 4);
      bits &= 0x7fffffffu;
      if (bits > 0x7f800000u) continue;  // NaN: no magnitude
      float a;
      std::memcpy(&a, &bits, 4);
      amax = std::max(amax, a);
      ++hist[bits >> kShift];
      ++count;
    }
  }

  float range(CalibMethod method, double percentile) const {
    if (method == CalibMethod::kMinMax || count == 0) return amax;
    const auto need =
        static_cast<uint64_t>(std::ceil(percentile / 100.0 * static_cast<double>(count)));
    uint64_t seen = 0;
    for (size_t b = 0; b < kBins; ++b) {
      seen += hist[b];
      if (seen >= need) {
        const auto edge_bits = static_cast<uint32_t>((b + 1) << kShift);
        float edge;
        std::memcpy(&edge, &edge_bits, 4);
        return std::min(edge, amax);
      }
    }
    return amax;
  }
};

class Collector : public MatmulObserver {
 public:
  explicit Collector(const Model& m) : model_(m) {}

  void observe(const Tensor& w, const float* x, int64_t n_tokens) override {
    auto it = by_data_.find(w.data());
    if (it == by_data_.end()) {
      const std::string name = model_.tensor_name(w);
      it = by_data_.emplace(w.data(), name.empty() ? nullptr : &ranges_[name]).first;
    }
    if (it->second != nullptr) it->second->add(x, n_tokens * w.dim(1));
  }

  const std::map<std::string, Range>& ranges() const { return ranges_; }

 private:
  const Model& model_;
  std::map<std::string, Range> ranges_;
  std::unordered_map<const void*, Range*> by_data_;
};

}  // namespace

std::optional<CalibMethod> parse_calib_method(std::string_view name) {
  if (name == "minmax") return CalibMethod::kMinMax;
  if (name == "percentile") return CalibMethod::kPercentile;
  return std::nullopt;
}

float w8a8_calib_range(const float* values, int64_t n, CalibMethod method, double percentile) {
  Range r;
  r.add(values, n);
  return r.range(method, percentile);
}

Result<std::map<std::string, float>> calibrate_w8a8(
    const Model& model, const Tokenizer& tok, std::string_view text, const W8A8CalibOptions& o,
    const std::function<void(int64_t, int64_t)>& progress) {
  if (o.method == CalibMethod::kPercentile && !(o.percentile > 0.0 && o.percentile <= 100.0))
    return Status::error("calibration: the percentile must be in (0, 100], got " +
                         std::to_string(o.percentile));
  Collector collector(model);
  auto total = run_calibration(model, tok, text, o.n_ctx, o.chunks, o.n_threads, collector,
                               "calibration", progress);
  if (!total) return total.status();
  std::map<std::string, float> scales;
  for (const auto& [name, r] : collector.ranges()) {
    const float range = r.range(o.method, o.percentile);
    if (range > 0.0f) scales[name] = range / 127.0f;
  }
  if (scales.empty()) return Status::error("calibration: no weight matrix of the model was seen");
  return scales;
}

}  // namespace nexus
