// Training metrics: one JSON object per optimizer step appended to a JSONL file (flushed each
// line, so a killed run keeps what it logged), read back for plots, and the loss-curve SVG.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nexus/status.h"

namespace nexus::train {

// One line of the metrics file.
struct MetricsRecord {
  int64_t step = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  double tokens_per_s = 0;         // averaged over this process's steps so far
  int64_t tokens = 0;              // tokens trained on so far (the whole run, resumes included)
  double elapsed_s = 0;            // wall time of this process so far
  std::optional<double> val_loss;  // on evaluation steps
  std::optional<double> loss_scale;  // with loss scaling (fp16): the scale of this step
  bool skipped = false;              // loss scaling found non-finite gradients: no update
};

// The record as one JSON object (no newline).
std::string to_json_line(const MetricsRecord& r);

class MetricsLog {
 public:
  // Opens `path` for appending. When `keep_through_step` >= 0 (a resume), records of later steps
  // (logged after the checkpoint by the interrupted run) and unreadable lines are dropped first.
  static Result<std::unique_ptr<MetricsLog>> open(const std::string& path,
                                                  int64_t keep_through_step = -1);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  Status append(const MetricsRecord& r);

 private:
  MetricsLog() = default;
  std::string path_;
  std::FILE* f_ = nullptr;
};

// The records of a metrics file in order; a line that is not a JSON object with a "step" (e.g.
// the partial last line of a killed run) is skipped. A missing file is an error.
Result<std::vector<MetricsRecord>> read_metrics(const std::string& path);

}  // namespace nexus::train
