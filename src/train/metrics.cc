// Metrics JSONL writing and reading (nlohmann::json).
#include "nexus/train/metrics.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nexus/io/mapped_file.h"

namespace nexus::train {
namespace {

std::optional<MetricsRecord> parse_line(const std::string& line) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) return std::nullopt;
  MetricsRecord r;
  auto num = [&](const char* key, double fallback) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
  };
  r.step = j["step"].get<int64_t>();
  r.loss = num("loss", NAN);
  r.lr = num("lr", NAN);
  r.grad_norm = num("grad_norm", NAN);
  r.tokens_per_s = num("tokens_per_s", NAN);
  r.tokens = static_cast<int64_t>(num("tokens", 0));
  r.elapsed_s = num("elapsed_s", NAN);
  if (j.contains("val_loss") && j["val_loss"].is_number()) r.val_loss = j["val_loss"].get<double>();
  if (j.contains("loss_scale") && j["loss_scale"].is_number())
    r.loss_scale = j["loss_scale"].get<double>();
  r.skipped = j.contains("skipped") && j["skipped"].is_boolean() && j["skipped"].get<bool>();
  return r;
}

}  // namespace

std::string to_json_line(const MetricsRecord& r) {
  nlohmann::ordered_json j;
  j["step"] = r.step;
  j["loss"] = r.loss;
  j["lr"] = r.lr;
  j["grad_norm"] = r.grad_norm;
  j["tokens_per_s"] = r.tokens_per_s;
  j["tokens"] = r.tokens;
  j["elapsed_s"] = r.elapsed_s;
  if (r.val_loss) j["val_loss"] = *r.val_loss;
  if (r.loss_scale) j["loss_scale"] = *r.loss_scale;
  if (r.skipped) j["skipped"] = true;
  return j.dump();
}

Result<std::unique_ptr<MetricsLog>> MetricsLog::open(const std::string& path,
                                                     int64_t keep_through_step) {
  if (keep_through_step >= 0 && std::filesystem::exists(path)) {
    std::ifstream in(path);
    std::string kept, line;
    while (std::getline(in, line)) {
      auto r = parse_line(line);
      if (r && r->step <= keep_through_step) kept += line + "\n";
    }
    NEXUS_RETURN_IF_ERROR(write_file_atomic(path, kept.data(), kept.size()));
  }
  std::unique_ptr<MetricsLog> log(new MetricsLog());
  log->path_ = path;
  log->f_ = std::fopen(path.c_str(), "a");
  if (!log->f_) return Status::error("cannot open --metrics file '" + path + "' for appending");
  return log;
}

MetricsLog::~MetricsLog() {
  if (f_) std::fclose(f_);
}

Status MetricsLog::append(const MetricsRecord& r) {
  const std::string line = to_json_line(r) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    return Status::error("cannot write metrics to '" + path_ + "'");
  return Status::ok();
}

Result<std::vector<MetricsRecord>> read_metrics(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::error("cannot read metrics file '" + path + "'");
  std::vector<MetricsRecord> out;
  std::string line;
  while (std::getline(in, line))
    if (auto r = parse_line(line)) out.push_back(*r);
  return out;
}

}  // namespace nexus::train
