// Exact vector search against faiss's flat inner-product index (and hnswlib's HNSW for an
// approximate point of reference) on the same random unit vectors, side by side in one process:
// queries/s for a batch of queries and for one query at a time, nexus's f32, f16 and int8 rows,
// and how often nexus's f32 top-k equals faiss's (ties aside) and the f16/int8/HNSW recall of the
// exact top-k. Built where libfaiss-dev is installed (docs/performance/serving.md, "Embedding search against faiss").
#include <faiss/IndexFlat.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <sstream>
#include <vector>

#ifdef NEXUS_HAVE_HNSWLIB
#include <hnswlib/hnswlib.h>
#endif

#include "nexus/core/thread_pool.h"
#include "nexus/runtime/vector_index.h"
#include "plot/svg_chart.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoll(item));
  return out;
}

std::vector<float> unit_vectors(int64_t n, int64_t dim, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(static_cast<size_t>(n * dim));
  for (float& x : v) x = nd(rng);
  for (int64_t i = 0; i < n; ++i) nexus::l2_normalize(std::span<float>(v).subspan(i * dim, dim));
  return v;
}

// Seconds per call of fn, the best of `reps` after one warm-up.
template <class Fn>
double best_seconds(int reps, Fn fn) {
  fn();
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

// Share of `want`'s top-k ids found in `got`'s, over the queries.
double recall(const std::vector<std::vector<int64_t>>& got,
              const std::vector<std::vector<int64_t>>& want) {
  int64_t hit = 0, all = 0;
  for (size_t q = 0; q < want.size(); ++q) {
    const std::set<int64_t> g(got[q].begin(), got[q].end());
    for (int64_t id : want[q]) hit += g.count(id), ++all;
  }
  return all ? static_cast<double>(hit) / static_cast<double>(all) : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Exact vector search: nexus against faiss IndexFlatIP (and hnswlib HNSW)"};
  std::string ns = "10000,100000,1000000", dims = "384,1024";
  int64_t nq = 100, k = 10, single = 20, hnsw_max = 100000;
  int threads = 2, reps = 3;
  std::string svg;
  app.add_option("--n", ns, "row counts, comma-separated")->capture_default_str();
  app.add_option("--dim", dims, "dimensions, comma-separated")->capture_default_str();
  app.add_option("--nq", nq, "queries in a batch")->capture_default_str();
  app.add_option("--single", single, "queries timed one at a time")->capture_default_str();
  app.add_option("-k", k, "results a query")->capture_default_str();
  app.add_option("-t,--threads", threads, "threads (both engines)")->capture_default_str();
  app.add_option("--reps", reps, "timed repetitions (best kept)")->capture_default_str();
  app.add_option("--hnsw-max", hnsw_max, "largest n given an HNSW index (its build is slow)")
      ->capture_default_str();
  app.add_option("--svg", svg, "also draw the batch queries/s as a bar chart here");
  CLI11_PARSE(app, argc, argv);
  nexus::BarChart chart;
  chart.title = "Exact top-" + std::to_string(k) + " search, batches of " + std::to_string(nq) +
                " queries, " + std::to_string(threads) + " threads";
  chart.x_label = "rows x dimension";
  chart.y_label = "queries/s";
  chart.series = {"faiss IndexFlatIP", "nexus f32", "nexus f16", "nexus int8"};
  chart.value_digits = 0;
  omp_set_num_threads(threads);
  nexus::ThreadPool pool(threads);
  std::printf("%9s %5s  %-13s %12s %12s %9s\n", "n", "dim", "engine", "batch q/s", "single q/s",
              "recall@k");
  for (int64_t dim : parse_list(dims))
    for (int64_t n : parse_list(ns)) {
      const std::vector<float> rows = unit_vectors(n, dim, 1), queries = unit_vectors(nq, dim, 2);
      std::vector<std::string> ids(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) ids[i] = std::to_string(i);
      // faiss first: the exact answer the others are scored against.
      faiss::IndexFlatIP flat(dim);
      flat.add(n, rows.data());
      std::vector<float> fd(static_cast<size_t>(nq * k));
      std::vector<faiss::Index::idx_t> fi(static_cast<size_t>(nq * k));
      const double f_batch =
          best_seconds(reps, [&] { flat.search(nq, queries.data(), k, fd.data(), fi.data()); });
      const double f_single = best_seconds(reps, [&] {
        for (int64_t q = 0; q < single; ++q)
          flat.search(1, queries.data() + q * dim, k, fd.data(), fi.data());
      });
      flat.search(nq, queries.data(), k, fd.data(), fi.data());
      std::vector<std::vector<int64_t>> exact(static_cast<size_t>(nq));
      for (int64_t q = 0; q < nq; ++q)
        exact[q].assign(fi.begin() + q * k, fi.begin() + (q + 1) * k);
      std::printf("%9lld %5lld  %-13s %12.0f %12.0f %9s\n", static_cast<long long>(n),
                  static_cast<long long>(dim), "faiss flat", nq / f_batch, single / f_single,
                  "1 (ref)");
      nexus::BarGroup group{
          std::to_string(n / 1000) + "K x " + std::to_string(dim), {nq / f_batch}, {}};
      for (nexus::DType type : {nexus::DType::kF32, nexus::DType::kF16, nexus::DType::kI8}) {
        auto ix = nexus::VectorIndex::build(ids, rows, dim, type, "bench");
        if (!ix) {
          std::fprintf(stderr, "%s\n", ix.status().message().c_str());
          return 1;
        }
        std::vector<std::vector<nexus::VectorIndex::Hit>> hits;
        const double b = best_seconds(reps, [&] { hits = ix->search(queries, nq, k, &pool); });
        const double s1 = best_seconds(reps, [&] {
          for (int64_t q = 0; q < single; ++q)
            ix->search(std::span<const float>(queries).subspan(q * dim, dim), 1, k, &pool);
        });
        std::vector<std::vector<int64_t>> got(static_cast<size_t>(nq));
        for (int64_t q = 0; q < nq; ++q)
          for (const auto& h : hits[q]) got[q].push_back(h.row);
        const std::string name = std::string("nexus ") + nexus::vector_type_name(type);
        std::printf("%9lld %5lld  %-13s %12.0f %12.0f %9.4f\n", static_cast<long long>(n),
                    static_cast<long long>(dim), name.c_str(), nq / b, single / s1,
                    recall(got, exact));
        group.values.push_back(nq / b);
      }
      chart.groups.push_back(std::move(group));
#ifdef NEXUS_HAVE_HNSWLIB
      if (n <= hnsw_max) {
        hnswlib::InnerProductSpace space(static_cast<size_t>(dim));
        hnswlib::HierarchicalNSW<float> hnsw(&space, static_cast<size_t>(n), 16, 200);
        const auto t0 = Clock::now();
        for (int64_t i = 0; i < n; ++i)
          hnsw.addPoint(rows.data() + i * dim, static_cast<size_t>(i));
        const double build = std::chrono::duration<double>(Clock::now() - t0).count();
        hnsw.setEf(64);
        std::vector<std::vector<int64_t>> got(static_cast<size_t>(nq));
        const double s1 = best_seconds(reps, [&] {
          for (int64_t q = 0; q < nq; ++q) {
            auto res = hnsw.searchKnn(queries.data() + q * dim, static_cast<size_t>(k));
            got[q].clear();
            while (!res.empty())
              got[q].push_back(static_cast<int64_t>(res.top().second)), res.pop();
          }
        });
        std::printf(
            "%9lld %5lld  %-13s %12s %12.0f %9.4f  (M 16, ef 64, built in %.1f s on 1 thread)\n",
            static_cast<long long>(n), static_cast<long long>(dim), "hnswlib", "-", nq / s1,
            recall(got, exact), build);
      }
#endif
    }
  if (!svg.empty())
    if (nexus::Status st = nexus::write_bar_chart_svg(chart, svg); !st) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return 1;
    }
  return 0;
}
