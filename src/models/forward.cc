// Pieces of the forward pass shared by all architectures.
#include "models/forward.h"

#include <cstring>
#include <string>

#include "models/layer.h"
#include "nexus/profile.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "nexus/status.h"
#include "ops/op_args.h"

namespace nexus {
namespace {

// After a matmul of a decode step: the workers prefetch their share of the next one.
void prefetch_next(const Tensor* const* w, int count, int64_t n, ForwardState& st) {
  if (st.schedule != nullptr) st.schedule->after(w, count, n, *st.pool);
}

}  // namespace

void linear(const Tensor& w, const Tensor& b, const float* x, int64_t n, float* y,
            ForwardState& st, const char* name) {
  NEXUS_PROFILE_OP(name, profile::current_layer(), profile::matmul_bytes(w, n),
                   profile::matmul_flops(w, n), profile::matmul_shapes(w, n));
  st.scratch->reset();
  matmul(w, x, n, y, *st.pool, *st.scratch);
  const Tensor* one = &w;
  prefetch_next(&one, 1, n, st);
  if (!b.empty()) add_bias(y, b.data_as<const float>(), n, w.dim(0));
}

void linear_group(std::initializer_list<LinearOut> outs, const float* x, int64_t n,
                  ForwardState& st, const char* name) {
  MatmulOut mo[4];
  int count = 0;
  int64_t bytes = 0, flops = 0;
  for (const LinearOut& o : outs) {
    NEXUS_CHECK(count < 4, std::string("[linear] too many outputs in ") + name);
    mo[count++] = {o.w, o.y};
    bytes += profile::matmul_bytes(*o.w, n);
    flops += profile::matmul_flops(*o.w, n);
  }
  NEXUS_PROFILE_OP(name, profile::current_layer(), bytes, flops,
                   profile::matmul_shapes(*mo[0].w, n));
  st.scratch->reset();
  matmul_group(mo, count, x, n, *st.pool, *st.scratch);
  const Tensor* ws[4];
  for (int i = 0; i < count; ++i) ws[i] = mo[i].w;
  prefetch_next(ws, count, n, st);
  for (const LinearOut& o : outs)
    if (!o.b->empty()) add_bias(o.y, o.b->data_as<const float>(), n, o.w->dim(0));
}

void store_kv(int64_t layer, ForwardState& st) {
  const int64_t w = st.kv->row_width();
  NEXUS_PROFILE_OP("store_kv", static_cast<int>(layer), profile::kv_store_bytes(*st.kv, st.n), 0,
                   "");
  for (int64_t t = 0; t < st.n; ++t)
    st.kv->store(st.kv_index(layer), st.seq[t], st.pos[t], st.k + t * w, st.v + t * w);
}

void output_head(const Model& model, ForwardState& st, bool layer_norm) {
  const ModelConfig& c = model.config();
  const ModelWeights& w = model.weights();
  NEXUS_PROFILE_SCOPE("output_head");
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
  if (st.hidden_only) {
    std::memcpy(st.logits, st.h, static_cast<size_t>(st.n_out * c.dim) * sizeof(float));
    return;
  }
  st.scratch->reset();
  NEXUS_PROFILE_OP("output", -1, profile::matmul_bytes(w.output, st.n_out),
                   profile::matmul_flops(w.output, st.n_out),
                   profile::matmul_shapes(w.output, st.n_out));
  matmul(w.output, st.h, st.n_out, st.logits, *st.pool, *st.scratch);
  const Tensor* head = &w.output;
  prefetch_next(&head, 1, st.n, st);
}

void forward_model(const Model& model, ForwardState& st) {
  const ModelConfig& c = model.config();
  for (int64_t l = 0; l < c.n_layers; ++l) {
    NEXUS_PROFILE_LAYER(l);
    layer_type(c, l).infer(model, l, st);
  }
  output_head(model, st, /*layer_norm=*/!model.weights().out_norm_b.empty());
}

}  // namespace nexus
