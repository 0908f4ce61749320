// write_loss_plot: the metrics records as train and validation series of one line chart.
#include "plot/loss_plot.h"

#include "plot/svg_line_chart.h"

namespace nexus::plot {

Status write_loss_plot(const std::vector<train::MetricsRecord>& records, const std::string& path,
                       const std::string& title) {
  LineChart chart;
  chart.title = title;
  chart.x_label = "step";
  chart.y_label = "loss";
  LineSeries train{"train loss", {}, {}, false}, val{"validation loss", {}, {}, true};
  for (const train::MetricsRecord& r : records) {
    train.x.push_back(static_cast<double>(r.step));
    train.y.push_back(r.loss);
    if (r.val_loss) {
      val.x.push_back(static_cast<double>(r.step));
      val.y.push_back(*r.val_loss);
    }
  }
  chart.series.push_back(std::move(train));
  if (!val.x.empty()) chart.series.push_back(std::move(val));
  return write_line_chart_svg(chart, path);
}

}  // namespace nexus::plot
