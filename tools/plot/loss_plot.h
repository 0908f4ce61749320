// The loss curve of a training run (`nexus train --plot`) as an SVG line chart.
#pragma once

#include <string>
#include <vector>

#include "nexus/status.h"
#include "nexus/train/metrics.h"

namespace nexus::plot {

// Train loss per step and validation loss at its steps as an SVG line chart, written atomically.
Status write_loss_plot(const std::vector<train::MetricsRecord>& records, const std::string& path,
                       const std::string& title);

}  // namespace nexus::plot
