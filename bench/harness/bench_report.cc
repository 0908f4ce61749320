// Benchmark output: llama-bench's JSON / CSV / markdown shapes, plus nexus's extra fields (peak
// RSS, KV bytes, bytes read per generated token and the memory-bandwidth bound).
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "harness/bench.h"

namespace nexus {
namespace {

using Json = nlohmann::ordered_json;

// One result as an ordered JSON object: llama-bench's fields first (same names and meaning), then
// nexus's. Fields that do not apply (bandwidth bound of a pp test) are null.
Json to_json(const BenchResult& r, const BenchEnv& env) {
  Json j;
  j["build_commit"] = env.build_commit;
  j["cpu_info"] = env.cpu_info;
  j["gpu_info"] = "";
  j["backends"] = "CPU";
  j["model_filename"] = r.model.filename;
  j["model_type"] = r.model.type;
  j["model_size"] = r.model.size;
  j["model_n_params"] = r.model.n_params;
  j["n_batch"] = r.n_batch;
  j["n_ubatch"] = r.n_batch;
  j["n_threads"] = r.test.n_threads;
  j["type_k"] = r.type_kv;
  j["type_v"] = r.type_kv;
  j["n_gpu_layers"] = 0;
  j["use_mmap"] = true;
  j["embeddings"] = false;
  j["n_prompt"] = r.test.n_prompt;
  j["n_gen"] = r.test.n_gen;
  j["n_depth"] = r.test.n_depth;
  j["test_time"] = r.test_time;
  j["avg_ns"] = r.avg_ns;
  j["stddev_ns"] = r.stddev_ns;
  j["avg_ts"] = r.avg_ts;
  j["stddev_ts"] = r.stddev_ts;
  j["samples_ns"] = r.samples_ns;
  j["samples_ts"] = r.samples_ts;
  j["test"] = r.test_name();
  j["n_seq"] = r.test.n_seq;
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  j["kv_bytes"] = r.kv_bytes;
  const bool tg = r.test.n_prompt == 0;
  j["bytes_per_token"] = tg ? Json(r.bytes_per_token) : Json(nullptr);
  j["bandwidth_gbps"] = r.bandwidth_gbps > 0 ? Json(r.bandwidth_gbps) : Json(nullptr);
  j["bound_ts"] = tg && r.bound_ts > 0 ? Json(r.bound_ts) : Json(nullptr);
  j["bound_fraction"] = tg && r.bound_ts > 0 ? Json(r.bound_fraction) : Json(nullptr);
  return j;
}

std::string csv_field(const Json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump();
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string human_bytes(double b) {
  if (b >= 1024.0 * 1024 * 1024) return fmt("%.2f GiB", b / (1024.0 * 1024 * 1024));
  return fmt("%.2f MiB", b / (1024.0 * 1024));
}

}  // namespace

std::string bench_to_json(const std::vector<BenchResult>& results, const BenchEnv& env) {
  Json arr = Json::array();
  for (const BenchResult& r : results) arr.push_back(to_json(r, env));
  return arr.dump(2) + "\n";
}

std::string bench_to_csv(const std::vector<BenchResult>& results, const BenchEnv& env) {
  std::string out;
  for (size_t i = 0; i < results.size(); ++i) {
    const Json j = to_json(results[i], env);
    std::string header, row;
    for (const auto& [k, v] : j.items()) {
      if (v.is_array()) continue;  // per-run samples stay in the JSON output
      header += (header.empty() ? "" : ",") + k;
      row += (row.empty() ? "" : ",") + csv_field(v);
    }
    if (i == 0) out += header + "\n";
    out += row + "\n";
  }
  return out;
}

std::string bench_to_markdown(const std::vector<BenchResult>& results, const BenchEnv& env) {
  const bool with_bound = std::any_of(results.begin(), results.end(),
                                      [](const BenchResult& r) { return r.bound_ts > 0; });
  std::vector<std::string> head = {"model", "size", "params",   "backend",   "threads",
                                   "test",  "t/s",  "peak RSS", "read/token"};
  if (with_bound) head.insert(head.end(), {"bound t/s", "of bound"});
  std::vector<std::vector<std::string>> rows;
  for (const BenchResult& r : results) {
    const bool tg = r.test.n_prompt == 0;
    const double p = static_cast<double>(r.model.n_params);
    std::vector<std::string> row = {r.model.type,
                                    human_bytes(static_cast<double>(r.model.size)),
                                    p < 1e9 ? fmt("%.2f M", p / 1e6) : fmt("%.2f B", p / 1e9),
                                    "CPU",
                                    std::to_string(r.test.n_threads),
                                    r.test_name(),
                                    fmt("%.2f", r.avg_ts) + fmt(" ± %.2f", r.stddev_ts),
                                    human_bytes(static_cast<double>(r.peak_rss_bytes)),
                                    tg ? fmt("%.2f MB", r.bytes_per_token / 1e6) : ""};
    if (with_bound) {
      row.push_back(tg && r.bound_ts > 0 ? fmt("%.2f", r.bound_ts) : "");
      row.push_back(tg && r.bound_ts > 0 ? fmt("%.1f %%", 100.0 * r.bound_fraction) : "");
    }
    rows.push_back(std::move(row));
  }
  // Column widths in characters (the "±" is two bytes but one column).
  auto width = [](const std::string& s) {
    return std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; });
  };
  std::vector<long> w(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    w[c] = std::max<long>(width(head[c]), 3);
    for (const auto& row : rows) w[c] = std::max<long>(w[c], width(row[c]));
  }
  auto left = [](size_t c) { return c == 0 || c == 3 || c == 5; };  // text columns
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = "|";
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(w[c] - width(cells[c]), ' ');
      s += " " + (left(c) ? cells[c] + pad : pad + cells[c]) + " |";
    }
    return s + "\n";
  };
  std::string out = line(head) + "|";
  for (size_t c = 0; c < head.size(); ++c)
    out += " " + (left(c) ? std::string(w[c], '-') : std::string(w[c] - 1, '-') + ":") + " |";
  out += "\n";
  for (const auto& row : rows) out += line(row);
  out += "\nbuild: " + env.build_commit + ", cpu: " + env.cpu_info + "\n";
  return out;
}

}  // namespace nexus
