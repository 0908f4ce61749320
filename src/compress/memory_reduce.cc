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

// The energy curve of one head's slot energies: curve[k] the share of the k largest, k=0..n.
std::vector<double> energy_curve(const std::vector<double>& sorted_desc) {
  const auto n = static_cast<int64_t>(sorted_desc.size());
  double sum = 0;
  for (double v : sorted_desc) sum += std::max(v, 0.0);
  std::vector<double> curve(static_cast<size_t>(n + 1), 0.0);
  for (int64_t k = 0; k < n; ++k)
    curve[k + 1] = curve[k] + (sum > 0 ? std::max(sorted_desc[k], 0.0) / sum : 1.0 / n);
  return curve;
}

// From each head's slot energies, descending ([layers][heads][width]): the plan's curves (the mean
// over a layer's heads), the slots each layer keeps and the energy they hold.
void choose(const std::vector<std::vector<std::vector<double>>>& energies, int64_t width,
            const MemoryReduceOptions& o, MemoryReducePlan& plan) {
  const size_t layers = energies.size();
  std::vector<std::vector<std::vector<double>>> head_curve(layers);
  plan.curve.assign(layers, std::vector<double>(static_cast<size_t>(width + 1), 0.0));
  for (size_t l = 0; l < layers; ++l)
    for (const std::vector<double>& e : energies[l]) {
      head_curve[l].push_back(energy_curve(e));
      for (int64_t k = 0; k <= width; ++k)
        plan.curve[l][k] += head_curve[l].back()[k] / static_cast<double>(energies[l].size());
    }
  plan.slots = choose_slots(plan.curve, width, o, head_curve);
  for (size_t l = 0; l < layers; ++l) plan.kept.push_back(plan.curve[l][plan.slots[l]]);
}

// Runs the model over `total` segments of the calibration tokens; after each, `visit(ctx, l)` for
// every layer (the segment's keys and the memory it was written into are the context's).
Status calibrate(const Model& model, std::span<const int32_t> tokens, int64_t total, int n_threads,
                 const std::function<void(const Context&, int64_t)>& visit,
                 const std::function<void(int64_t, int64_t)>& progress) {
  const ModelConfig& c = model.config();
  const int64_t seg = c.memory_segment;
  ContextOptions co;
  co.n_ctx = total * seg + 1;
  co.max_batch = seg;
  co.n_threads = n_threads;
  auto ctx = Context::create(model, co);
  if (!ctx) return ctx.status();
  Batch b;
  std::vector<float> logits;
  for (int64_t j = 0; j < total; ++j) {
    b.clear();
    for (int64_t i = 0; i < seg; ++i)
      b.add(tokens[static_cast<size_t>(j * seg + i)], static_cast<int32_t>(j * seg + i), 0,
            i + 1 == seg);
    NEXUS_RETURN_IF_ERROR((*ctx)->decode(b, &logits));
    for (int64_t l = 0; l < c.n_layers; ++l) visit(**ctx, l);
    if (progress) progress(j + 1, total);
  }
  return Status::ok();
}

// The linear memories: each head's uncentred key-feature covariance, its principal directions.
Status plan_linear(const Model& model, std::span<const int32_t> tokens, int64_t total,
                   const MemoryReduceOptions& o,
                   const std::function<void(int64_t, int64_t)>& progress, MemoryReducePlan& plan) {
  const ModelConfig& c = model.config();
  const int64_t seg = c.memory_segment, d = c.head_dim, kv = c.n_kv_heads, L = c.n_layers;
  // Per layer and head: sum over keys of f f^T.
  std::vector<double> cov(static_cast<size_t>(L * kv * d * d), 0.0), f(static_cast<size_t>(d));
  NEXUS_RETURN_IF_ERROR(calibrate(
      model, tokens, total, o.n_threads,
      [&](const Context& ctx, int64_t l) {
        const std::vector<float> keys = ctx.long_term_segment_keys(0, l);
        for (int64_t i = 0; i < seg; ++i)
          for (int64_t g = 0; g < kv; ++g) {
            key_feature(c.memory_kind, keys.data() + (i * kv + g) * d, d, f.data());
            double* m = cov.data() + (l * kv + g) * d * d;
            for (int64_t x = 0; x < d; ++x)
              for (int64_t y = 0; y < d; ++y) m[x * d + y] += f[x] * f[y];
          }
      },
      progress));
  std::vector<std::vector<std::vector<double>>> values(static_cast<size_t>(L)),
      vecs(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l)
    for (int64_t g = 0; g < kv; ++g) {
      const double* m = cov.data() + (l * kv + g) * d * d;
      symmetric_eigen(std::vector<double>(m, m + d * d), d, values[l].emplace_back(),
                      vecs[l].emplace_back());
    }
  choose(values, d, o, plan);
  for (int64_t l = 0; l < L; ++l) {
    const int64_t r = plan.slots[l];
    std::vector<float> p(static_cast<size_t>(kv * d * r));
    for (int64_t g = 0; g < kv; ++g)
      for (int64_t x = 0; x < d; ++x)
        for (int64_t a = 0; a < r; ++a)
          p[(g * d + x) * r + a] = static_cast<float>(vecs[l][g][x * d + a]);
    plan.proj.push_back(std::move(p));
  }
  return Status::ok();
}

// The deep memory: each hidden unit's read energy over the calibration keys, with the weights
// W = W0 + D as the segment left them; each head keeps its most energetic units.
Status plan_deep(const Model& model, std::span<const int32_t> tokens, int64_t total,
                 const MemoryReduceOptions& o,
                 const std::function<void(int64_t, int64_t)>& progress, MemoryReducePlan& plan) {
  const ModelConfig& c = model.config();
  const int64_t seg = c.memory_segment, d = c.head_dim, kv = c.n_kv_heads, L = c.n_layers;
  const int64_t h = c.memory_hidden, n = d * h, tf = titans_mlp_floats(d, h);
  std::vector<double> energy(static_cast<size_t>(L * kv * h), 0.0), f(static_cast<size_t>(d));
  std::vector<double> wa(static_cast<size_t>(n)), out2(static_cast<size_t>(h));
  NEXUS_RETURN_IF_ERROR(calibrate(
      model, tokens, total, o.n_threads,
      [&](const Context& ctx, int64_t l) {
        const std::vector<float> keys = ctx.long_term_segment_keys(0, l);
        const std::span<const float> mem = ctx.long_term_memory(0, l);
        for (int64_t g = 0; g < kv; ++g) {
          const float* dm = mem.data() + g * tf;  // D1 [d][h], then D2 [h][d]
          const LayerWeights& lw = model.weights().layers[static_cast<size_t>(l)];
          const float* w10 = lw.memory_w1.data_as<const float>() + g * n;
          const float* w20 = lw.memory_w2.data_as<const float>() + g * n;
          for (int64_t e = 0; e < n; ++e) wa[e] = static_cast<double>(w10[e]) + dm[e];
          for (int64_t j = 0; j < h; ++j) {
            double s = 0;
            for (int64_t x = 0; x < d; ++x) {
              const double v = static_cast<double>(w20[j * d + x]) + dm[n + j * d + x];
              s += v * v;
            }
            out2[j] = s;
          }
          double* e = energy.data() + (l * kv + g) * h;
          for (int64_t i = 0; i < seg; ++i) {
            key_feature(c.memory_kind, keys.data() + (i * kv + g) * d, d, f.data());
            for (int64_t j = 0; j < h; ++j) {
              double z = 0;
              for (int64_t x = 0; x < d; ++x) z += f[x] * wa[x * h + j];
              const double a = z / (1 + std::exp(-z));
              e[j] += a * a * out2[j];
            }
          }
        }
      },
      progress));
  // Each head's units by energy, most first, and their energies in that order.
  std::vector<std::vector<std::vector<int64_t>>> order(static_cast<size_t>(L));
  std::vector<std::vector<std::vector<double>>> sorted(static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l)
    for (int64_t g = 0; g < kv; ++g) {
      const double* e = energy.data() + (l * kv + g) * h;
      std::vector<int64_t>& idx = order[l].emplace_back(static_cast<size_t>(h));
      std::iota(idx.begin(), idx.end(), 0);
      std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return e[a] > e[b]; });
      std::vector<double>& es = sorted[l].emplace_back();
      for (int64_t j : idx) es.push_back(e[j]);
    }
  choose(sorted, h, o, plan);
  for (int64_t l = 0; l < L; ++l) {
    const int64_t r = plan.slots[l];
    std::vector<int64_t> units;
    for (int64_t g = 0; g < kv; ++g) {
      std::vector<int64_t> keep(order[l][g].begin(), order[l][g].begin() + r);
      std::sort(keep.begin(), keep.end());
      units.insert(units.end(), keep.begin(), keep.end());
    }
    plan.units.push_back(std::move(units));
  }
  return Status::ok();
}

}  // namespace

Result<MemoryReducePlan> plan_memory_reduce(const Model& model, std::span<const int32_t> tokens,
                                            const MemoryReduceOptions& o,
                                            const std::function<void(int64_t, int64_t)>& progress) {
  const ModelConfig& c = model.config();
  if (c.memory_segment == 0)
    return Status::error("memory-reduce: " + c.arch_name + " has no long-term memory (nexus-ltm)");
  if (!c.memory_slots.empty())
    return Status::error("memory-reduce: the memory is already reduced; reduce the full model");
  if ((o.energy > 0) == (o.ratio > 0))
    return Status::error("memory-reduce: give a compression ratio or an energy to keep, not both");
  if (o.ratio > 0 && o.ratio < 1)
    return Status::error("memory-reduce: the compression ratio must be >= 1");
  if (o.energy > 1) return Status::error("memory-reduce: the energy kept must be in (0, 1]");
  if (o.adaptive && o.ratio <= 0)
    return Status::error("memory-reduce: adaptive spreads a compression ratio's slots");
  const int64_t seg = c.memory_segment;
  const int64_t total =
      std::min<int64_t>(o.max_segments, static_cast<int64_t>(tokens.size()) / seg);
  if (total < 1)
    return Status::error("memory-reduce: the calibration text is " + std::to_string(tokens.size()) +
                         " tokens, fewer than one memory segment of " + std::to_string(seg));
  MemoryReducePlan plan;
  plan.segments = total;
  plan.width = c.memory_hidden > 0 ? c.memory_hidden : c.head_dim;
  NEXUS_RETURN_IF_ERROR(c.memory_hidden > 0 ? plan_deep(model, tokens, total, o, progress, plan)
                                            : plan_linear(model, tokens, total, o, progress, plan));
  return plan;
}

Result<GgufWriter> memory_reduce_gguf(const Model& model, const MemoryReducePlan& plan) {
  const ModelConfig& c = model.config();
  const GgufFile& in = model.gguf();
  const bool deep = c.memory_hidden > 0;
  if (c.memory_segment == 0 || static_cast<int64_t>(plan.slots.size()) != c.n_layers ||
      (deep ? plan.units.size() : plan.proj.size()) != plan.slots.size())
    return Status::error("memory-reduce: the plan does not fit " + in.path());
  const int64_t n_kv = c.n_kv_heads, d = c.head_dim, h = c.memory_hidden;
  GgufWriter w;
  w.copy_metadata(in);
  w.set_i32_array("nexus-ltm.memory.slots", plan.slots);
  for (const GgufTensorInfo& t : in.tensors()) {
    if (t.name.find(".memory_proj") != std::string::npos) continue;
    const bool w1 = t.name.ends_with(".memory_w1"), w2 = t.name.ends_with(".memory_w2");
    if (!deep || (!w1 && !w2)) {
      w.add_tensor(t.name, t.dtype, t.shape, t.data);
      continue;
    }
    const size_t l = std::stoul(t.name.substr(4));  // "blk.N."
    const int64_t r = plan.slots[l];
    const std::vector<int64_t>& units = plan.units[l];
    if (t.dtype != DType::kF32 || t.nbytes != n_kv * d * h * sizeof(float) ||
        static_cast<int64_t>(units.size()) != n_kv * r)
      return Status::error("memory-reduce: the plan does not fit " + t.name);
    const auto* src = reinterpret_cast<const float*>(t.data);
    std::vector<float> out(static_cast<size_t>(n_kv * d * r));
    for (int64_t g = 0; g < n_kv; ++g)
      for (int64_t a = 0; a < r; ++a) {
        const int64_t j = units[g * r + a];
        for (int64_t x = 0; x < d; ++x) {
          if (w1)  // [d][h]: column j
            out[(g * d + x) * r + a] = src[(g * d + x) * h + j];
          else  // [h][d]: row j
            out[(g * r + a) * d + x] = src[(g * h + j) * d + x];
        }
      }
    w.add_tensor(t.name, DType::kF32,
                 w1 ? std::vector<int64_t>{n_kv, d, r} : std::vector<int64_t>{n_kv, r, d},
                 out.data());
  }
  if (!deep)
    for (size_t l = 0; l < plan.slots.size(); ++l)
      w.add_tensor("blk." + std::to_string(l) + ".memory_proj", DType::kF32,
                   {n_kv, d, plan.slots[l]}, plan.proj[l].data());
  return w;
}

}  // namespace nexus
