// Pieces of the forward pass shared by all architectures.
#include "runtime/forward.h"

#include <cstring>

#include "ops/elementwise.h"
#include "ops/matmul.h"

namespace nexus {

void linear(const Tensor& w, const Tensor& b, const float* x, int64_t n, float* y,
            ForwardState& st) {
  st.scratch->reset();
  matmul(w, x, n, y, *st.pool, *st.scratch);
  if (!b.empty()) add_bias(y, b.data_as<const float>(), n, w.dim(0));
}

void store_kv(int64_t layer, ForwardState& st) {
  const int64_t w = st.kv->row_width();
  for (int64_t t = 0; t < st.n; ++t)
    st.kv->store(layer, st.seq[t], st.pos[t], st.k + t * w, st.v + t * w);
}

void output_head(const Model& model, ForwardState& st, bool layer_norm) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  // Gather the wanted rows, then normalise and project only those.
  for (int64_t i = 0; i < st.n_out; ++i)
    std::memcpy(st.h + i * c.dim, st.x + st.out_rows[i] * c.dim, c.dim * sizeof(float));
  if (layer_norm) {
    nexus::layer_norm(st.h, w.out_norm.data_as<const float>(),
                      w.out_norm_b.empty() ? nullptr : w.out_norm_b.data_as<const float>(),
                      c.norm_eps, st.h, st.n_out, c.dim);
  } else {
    rms_norm(st.h, w.out_norm.data_as<const float>(), c.norm_eps, st.h, st.n_out, c.dim);
  }
  st.scratch->reset();
  matmul(w.output, st.h, st.n_out, st.logits, *st.pool, *st.scratch);
}

}  // namespace nexus
