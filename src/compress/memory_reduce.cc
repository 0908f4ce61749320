// Slot reduction of a nexus-ltm memory (memory_reduce.h): key-feature covariances from a
// calibration run, their eigenvectors, and the slots each layer keeps.
#include "nexus/compress/memory_reduce.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backends/api/memory.h"
#include "nexus/context.h"

namespace nexus {

void symmetric_eigen(std::vector<double> a, int64_t n, std::vector<double>& values,
                     std::vector<double>& vectors) {
  std::vector<double> v(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) v[i * n + i] = 1.0;
  double scale = 0;
  for (double x : a) scale += x * x;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) off += a[p * n + q] * a[p * n + q];
    if (off <= 1e-30 * scale || off == 0) break;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        const double apq = a[p * n + q];
        if (apq == 0) continue;
        // The rotation that zeroes a[p][q] (Golub and Van Loan's symmetric Schur step).
        const double tau = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        const double t = (tau >= 0 ? 1.0 : -1.0) / (std::abs(tau) + std::sqrt(1 + tau * tau));
        const double c = 1 / std::sqrt(1 + t * t), s = t * c;
        for (int64_t k = 0; k < n; ++k) {  // columns p and q
          const double akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (int64_t k = 0; k < n; ++k) {  // rows p and q
          const double apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (int64_t k = 0; k < n; ++k) {
          const double vkp = v[k * n + p], vkq = v[k * n + q];
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t x, int64_t y) { return a[x * n + x] > a[y * n + y]; });
  values.resize(static_cast<size_t>(n));
  vectors.assign(static_cast<size_t>(n * n), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    values[j] = a[order[j] * n + order[j]];
    for (int64_t i = 0; i < n; ++i) vectors[i * n + j] = v[i * n + order[j]];
  }
}

namespace {

// The memory's key feature of one head's raw key (backends/api/memory.h).
void key_feature(MemoryKind kind, const float* k, int64_t d, double* f) {
  if (kind == MemoryKind::kTitans) {
    double s = kTitansEps;
    for (int64_t i = 0; i < d; ++i) s += static_cast<double>(k[i]) * k[i];
    const double n = std::sqrt(s);
    for (int64_t i = 0; i < d; ++i) f[i] = k[i] / n;
  } else {
    for (int64_t i = 0; i < d; ++i) f[i] = k[i] > 0 ? k[i] + 1.0 : std::exp(k[i]);
  }
}

// Slots a layer: the fewest holding `energy` of every head, the ratio's share, or (adaptive)
// the ratio's total handed out a slot at a time to the layer whose next direction holds most.
std::vector<int64_t> choose_slots(const std::vector<std::vector<double>>& curve, int64_t d,
                                  const MemoryReduceOptions& o,
                                  const std::vector<std::vector<std::vector<double>>>& head_curve) {
  const auto layers = static_cast<int64_t>(curve.size());
  std::vector<int64_t> slots(static_cast<size_t>(layers), 1);
  if (o.energy > 0) {
    for (int64_t l = 0; l < layers; ++l)
      for (const std::vector<double>& h : head_curve[l]) {
        int64_t k = 1;
        while (k < d && h[k] < o.energy - 1e-12) ++k;
        slots[l] = std::max(slots[l], k);
      }
    return slots;
  }
  const int64_t each = std::clamp<int64_t>(std::llround(static_cast<double>(d) / o.ratio), 1, d);
  if (!o.adaptive) return std::vector<int64_t>(static_cast<size_t>(layers), each);
  for (int64_t budget = layers * (each - 1); budget > 0; --budget) {
    int64_t best = -1;
    double gain = -1;
    for (int64_t l = 0; l < layers; ++l) {
      if (slots[l] >= d) continue;
      const double g = curve[l][slots[l] + 1] - curve[l][slots[l]];
      if (g > gain) gain = g, best = l;
    }
    if (best < 0) break;
    ++slots[best];
  }
  return slots;
}

}  // namespace

Result<MemoryReducePlan> plan_memory_reduce(const Model& model, std::span<const int32_t> tokens,
                                            const MemoryReduceOptions& o,
                                            const std::function<void(int64_t, int64_t)>& progress) {
  const ModelConfig& c = model.config();
  if (c.memory_segment == 0)
    return Status::error("memory-reduce: " + c.arch_name + " has no long-term memory (nexus-ltm)");
  if (c.memory_hidden > 0)
    return Status::error(
        "memory-reduce: the memory is Titans' deep memory (an MLP of " +
        std::to_string(c.memory_hidden) +
        " hidden units); slot reduction projects the keys of a linear memory (infini, or titans "
        "with depth 1)");
  if (!c.memory_slots.empty())
    return Status::error("memory-reduce: the memory is already reduced; reduce the full model");
  if ((o.energy > 0) == (o.ratio > 0))
    return Status::error("memory-reduce: give a compression ratio or an energy to keep, not both");
  if (o.ratio > 0 && o.ratio < 1)
    return Status::error("memory-reduce: the compression ratio must be >= 1");
  if (o.energy > 1) return Status::error("memory-reduce: the energy kept must be in (0, 1]");
  if (o.adaptive && o.ratio <= 0)
    return Status::error("memory-reduce: adaptive spreads a compression ratio's slots");
  const int64_t seg = c.memory_segment, d = c.head_dim, kv = c.n_kv_heads, L = c.n_layers;
  const int64_t total =
      std::min<int64_t>(o.max_segments, static_cast<int64_t>(tokens.size()) / seg);
  if (total < 1)
    return Status::error("memory-reduce: the calibration text is " + std::to_string(tokens.size()) +
                         " tokens, fewer than one memory segment of " + std::to_string(seg));
  ContextOptions co;
  co.n_ctx = total * seg + 1;
  co.max_batch = seg;
  co.n_threads = o.n_threads;
  auto ctx = Context::create(model, co);
  if (!ctx) return ctx.status();
  // Per layer and head: sum over keys of f f^T.
  std::vector<double> cov(static_cast<size_t>(L * kv * d * d), 0.0), f(static_cast<size_t>(d));
  Batch b;
  std::vector<float> logits;
  for (int64_t j = 0; j < total; ++j) {
    b.clear();
    for (int64_t i = 0; i < seg; ++i)
      b.add(tokens[static_cast<size_t>(j * seg + i)], static_cast<int32_t>(j * seg + i), 0,
            i + 1 == seg);
    NEXUS_RETURN_IF_ERROR((*ctx)->decode(b, &logits));
    for (int64_t l = 0; l < L; ++l) {
      const std::span<const float> keys = (*ctx)->long_term_segment_keys(0, l);
      for (int64_t i = 0; i < seg; ++i)
        for (int64_t g = 0; g < kv; ++g) {
          key_feature(c.memory_kind, keys.data() + (i * kv + g) * d, d, f.data());
          double* m = cov.data() + (l * kv + g) * d * d;
          for (int64_t x = 0; x < d; ++x)
            for (int64_t y = 0; y < d; ++y) m[x * d + y] += f[x] * f[y];
        }
    }
    if (progress) progress(j + 1, total);
  }
  MemoryReducePlan plan;
  plan.segments = total;
  std::vector<std::vector<std::vector<double>>> vecs(static_cast<size_t>(L)),
      head_curve(static_cast<size_t>(L));
  plan.curve.assign(static_cast<size_t>(L), std::vector<double>(static_cast<size_t>(d + 1), 0.0));
  for (int64_t l = 0; l < L; ++l)
    for (int64_t g = 0; g < kv; ++g) {
      const double* m = cov.data() + (l * kv + g) * d * d;
      std::vector<double> values, vectors;
      symmetric_eigen(std::vector<double>(m, m + d * d), d, values, vectors);
      double sum = 0;
      for (double v : values) sum += std::max(v, 0.0);
      std::vector<double> curve(static_cast<size_t>(d + 1), 0.0);
      for (int64_t k = 0; k < d; ++k)
        curve[k + 1] = curve[k] + (sum > 0 ? std::max(values[k], 0.0) / sum : 1.0 / d);
      for (int64_t k = 0; k <= d; ++k) plan.curve[l][k] += curve[k] / static_cast<double>(kv);
      head_curve[l].push_back(std::move(curve));
      vecs[l].push_back(std::move(vectors));
    }
  plan.slots = choose_slots(plan.curve, d, o, head_curve);
  for (int64_t l = 0; l < L; ++l) {
    const int64_t r = plan.slots[l];
    std::vector<float> p(static_cast<size_t>(kv * d * r));
    for (int64_t g = 0; g < kv; ++g)
      for (int64_t x = 0; x < d; ++x)
        for (int64_t a = 0; a < r; ++a)
          p[(g * d + x) * r + a] = static_cast<float>(vecs[l][g][x * d + a]);
    plan.proj.push_back(std::move(p));
    plan.kept.push_back(plan.curve[l][r]);
  }
  return plan;
}

Result<GgufWriter> memory_reduce_gguf(const Model& model, const MemoryReducePlan& plan) {
  const ModelConfig& c = model.config();
  const GgufFile& in = model.gguf();
  if (c.memory_segment == 0 || static_cast<int64_t>(plan.slots.size()) != c.n_layers ||
      plan.proj.size() != plan.slots.size())
    return Status::error("memory-reduce: the plan does not fit " + in.path());
  const int64_t n_kv = c.n_kv_heads, d = c.head_dim;
  GgufWriter w;
  w.copy_metadata(in);
  w.set_i32_array("nexus-ltm.memory.slots", plan.slots);
  for (const GgufTensorInfo& t : in.tensors()) {
    if (t.name.find(".memory_proj") != std::string::npos) continue;
    w.add_tensor(t.name, t.dtype, t.shape, t.data);
  }
  for (size_t l = 0; l < plan.slots.size(); ++l)
    w.add_tensor("blk." + std::to_string(l) + ".memory_proj", DType::kF32, {n_kv, d, plan.slots[l]},
                 plan.proj[l].data());
  return w;
}

}  // namespace nexus
