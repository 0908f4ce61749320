// Long-term memory utilisation: the normaliser z of each head tells how much each slot (key
// dimension) was written to; M's norm how much the memory holds. Titans' deep memory counts its
// hidden units as slots, each weighed by what was written into its weights (D = W - W0).
#include "nexus/runtime/memory_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "models/ltm_state.h"
#include "nexus/model.h"

namespace nexus {

std::vector<LayerMemoryStats> memory_stats(const Context& ctx, int seq) {
  const ModelConfig& c = ctx.model().config();
  std::vector<LayerMemoryStats> out;
  if (c.memory_segment == 0) return out;
  const int64_t d = c.head_dim;
  const bool titans = c.memory_kind == MemoryKind::kTitans;
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::span<const float> mem = ctx.long_term_memory(seq, l);
    const int64_t hidden = c.memory_hidden_at(l);
    const int64_t rows = hidden > 0 ? hidden : memory_rows(d, c.memory_slots_at(l));
    const int64_t mf = ltm_head_floats(c, l);
    LayerMemoryStats s;
    s.layer = l;
    s.slots = rows;
    for (int64_t g = 0; g < c.n_kv_heads; ++g) {
      const float* m = mem.data() + g * mf;
      // A slot's mass: Infini's normaliser entry, the squared norm of Titans' memory row, or of
      // the deep memory's written weights into and out of a hidden unit (D1's column, D2's row).
      std::vector<float> z(static_cast<size_t>(rows), 0.0f);
      double sq = 0;
      if (hidden > 0) {
        const float *d1 = m, *d2 = m + d * hidden;
        for (int64_t a = 0; a < d; ++a)
          for (int64_t j = 0; j < hidden; ++j) {
            z[static_cast<size_t>(j)] += d1[a * hidden + j] * d1[a * hidden + j];
            z[static_cast<size_t>(j)] += d2[j * d + a] * d2[j * d + a];
          }
        for (float v : z) sq += v;
      } else {
        if (titans)
          for (int64_t a = 0; a < rows; ++a) {
            float r = 0;
            for (int64_t c2 = 0; c2 < d; ++c2) r += m[a * d + c2] * m[a * d + c2];
            z[static_cast<size_t>(a)] = r;
          }
        else
          z.assign(m + rows * d, m + rows * d + rows);
        for (int64_t i = 0; i < rows * d; ++i) sq += static_cast<double>(m[i]) * m[i];
      }
      double total = 0;
      for (float v : z) total += v;
      std::sort(z.begin(), z.end(), std::greater<>());
      double acc = 0;
      int64_t used = 0;
      while (used < rows && acc < 0.9 * total) acc += z[static_cast<size_t>(used++)];
      s.written += total / static_cast<double>(c.n_kv_heads);
      s.slots_used += static_cast<double>(used) / static_cast<double>(rows * c.n_kv_heads);
      s.norm += std::sqrt(sq) / static_cast<double>(c.n_kv_heads);
    }
    out.push_back(s);
  }
  return out;
}

std::string format_memory_stats(const std::vector<LayerMemoryStats>& stats, const ModelConfig& c) {
  int64_t floats = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) floats += c.n_kv_heads * ltm_head_floats(c, l);
  const std::string kind = c.memory_kind != MemoryKind::kTitans ? "infini"
                           : c.memory_hidden > 0                ? "titans, an MLP"
                                                                : "titans";
  const std::string slot = c.memory_hidden > 0 ? "slots (hidden units) of " : "slots of ";
  std::string r = "long-term memory (" + kind + "): " + std::to_string(c.n_kv_heads) +
                  " heads a layer, " + slot + std::to_string(c.head_dim) + " values (" +
                  std::to_string(floats * 4) +
                  " bytes in all)\n  layer  slots  written  slots holding 90%  norm\n";
  char line[112];
  for (const LayerMemoryStats& s : stats) {
    std::snprintf(line, sizeof line, "  %5lld  %5lld  %7.1f  %17.0f%%  %.3g\n",
                  static_cast<long long>(s.layer), static_cast<long long>(s.slots), s.written,
                  100.0 * s.slots_used, s.norm);
    r += line;
  }
  return r;
}

}  // namespace nexus
