// Precision names and the loss scaler.
#include "nexus/train/precision.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace nexus::train {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kBF16:
      return "bf16";
    case Precision::kF16:
      return "f16";
    default:
      return "f32";
  }
}

Result<Precision> parse_precision(std::string_view name) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "f32" || s == "fp32") return Precision::kF32;
  if (s == "bf16") return Precision::kBF16;
  if (s == "f16" || s == "fp16") return Precision::kF16;
  return Status::error("unknown precision '" + std::string(name) + "' (use f32, bf16 or f16)");
}

bool LossScaler::update(bool finite) {
  if (!opts_.dynamic) {
    if (!finite) ++skipped_;
    return finite;
  }
  if (!finite) {
    scale_ *= opts_.backoff;
    good_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_ >= opts_.growth_interval) {
    scale_ *= opts_.growth;
    good_ = 0;
  }
  return true;
}

}  // namespace nexus::train
