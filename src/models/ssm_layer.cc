// The Mamba block at inference. Per layer: h = rmsnorm(x); the input projection; the causal conv
// (with each sequence's rolling conv state) and SiLU; dt = softplus(.. + bias); the selective
// scan from each sequence's state; y * silu(z) (mamba2: then the grouped RMSNorm); the output
// projection added to x. Mamba-1 gets dt, B and C from the conv output through ssm_x and ssm_dt;
// Mamba-2 takes them from the input projection (z | x B C | dt) and has one decay per head.
#include "models/ssm_layer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "models/forward.h"
#include "ops/elementwise.h"
#include "ops/ssm.h"

namespace nexus {
namespace {

const float* vec(const Tensor& t) { return t.data_as<const float>(); }

// Widths of one token's working rows.
struct Widths {
  int64_t in_proj, conv, xdb, dt, y;
};

Widths widths(const ModelConfig& c) {
  const bool m2 = c.arch == Arch::kMamba2;
  const int64_t conv = c.ssm_conv_channels();
  return {m2 ? c.ssm_inner + conv + c.ssm_dt_rank : 2 * c.ssm_inner, conv,
          m2 ? 0 : c.ssm_dt_rank + 2 * c.ssm_state, m2 ? c.ssm_dt_rank : c.ssm_inner + c.ssm_dt_rank,
          c.ssm_inner};
}

void check_f32(const Tensor& t, const char* what, int64_t l) {
  NEXUS_CHECK(t.dtype() == DType::kF32, "[ssm] layer " + std::to_string(l) + ": " + what +
                                            " must be F32, is " +
                                            std::string(dtype_name(t.dtype())));
}

// Runs fn(seq, first row, rows) over the runs of consecutive batch rows of one sequence, in batch
// order (a sequence's tokens are in position order, so its state advances run by run).
template <typename Fn>
void for_each_run(const ForwardState& st, const Fn& fn) {
  for (int64_t r0 = 0; r0 < st.n;) {
    int64_t r1 = r0 + 1;
    while (r1 < st.n && st.seq[r1] == st.seq[r0]) ++r1;
    fn(st.seq[r0], r0, r1 - r0);
    r0 = r1;
  }
}

class SsmLayer final : public LayerType {
 public:
  void infer(const Model& model, int64_t l, ForwardState& st) const override {
    const ModelConfig& c = model.config();
    const LayerWeights& w = model.weights().layers[l];
    for (const auto& [t, name] : {std::pair{&w.ssm_conv1d, "ssm_conv1d"},
                                  {&w.ssm_conv1d_b, "ssm_conv1d.bias"}, {&w.ssm_a, "ssm_a"},
                                  {&w.ssm_d, "ssm_d"}, {&w.ssm_dt_b, "ssm_dt.bias"}})
      check_f32(*t, name, l);
    const bool m2 = c.arch == Arch::kMamba2;
    const int64_t n = st.n, di = c.ssm_inner, N = c.ssm_state, H = c.ssm_heads();
    const int64_t P = c.ssm_head_dim(), G = c.ssm_n_groups(), R = c.ssm_dt_rank;
    const Widths wd = widths(c);
    float* zx = st.ssm_buf;               // [n][in_proj]
    float* xc = zx + n * wd.in_proj;      // [n][conv]
    float* xdb = xc + n * wd.conv;        // [n][xdb] (mamba)
    float* dt = xdb + n * wd.xdb;         // [n][H] (mamba: [n][di] then [n][R])
    float* y = dt + n * wd.dt;            // [n][di]

    rms_norm(st.x, vec(w.attn_norm), c.norm_eps, st.h, n, c.dim);
    linear(w.ssm_in, Tensor(), st.h, n, zx, st, "ssm_in");
    // z is the second half of mamba's projection, the first part of mamba2's.
    const float* xin = m2 ? zx + di : zx;
    const float* z = m2 ? zx : zx + di;
    for_each_run(st, [&](int seq, int64_t r0, int64_t len) {
      ssm_conv({xin + r0 * wd.in_proj, wd.in_proj, st.ssm->conv(l, seq), vec(w.ssm_conv1d),
                vec(w.ssm_conv1d_b), nullptr, xc + r0 * wd.conv, 1, len, wd.conv, c.ssm_conv},
               st.pool);
    });
    const float* B;
    const float* C;
    int64_t ld_bc;
    if (m2) {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t h = 0; h < H; ++h)
          dt[i * H + h] = softplus(zx[i * wd.in_proj + di + wd.conv + h] + vec(w.ssm_dt_b)[h]);
      B = xc + di;
      C = xc + di + G * N;
      ld_bc = wd.conv;
    } else {
      linear(w.ssm_x, Tensor(), xc, n, xdb, st, "ssm_x");
      float* dtr = dt + n * di;  // dt's low rank part, gathered for its projection
      for (int64_t i = 0; i < n; ++i)
        std::copy(xdb + i * wd.xdb, xdb + i * wd.xdb + R, dtr + i * R);
      linear(w.ssm_dt, w.ssm_dt_b, dtr, n, dt, st, "ssm_dt");
      for (int64_t i = 0; i < n * di; ++i) dt[i] = softplus(dt[i]);
      B = xdb + R;
      C = xdb + R + N;
      ld_bc = wd.xdb;
    }
    for_each_run(st, [&](int seq, int64_t r0, int64_t len) {
      ssm_scan({xc + r0 * wd.conv, wd.conv, dt + r0 * H, H, vec(w.ssm_a), m2 ? 1 : N,
                B + r0 * ld_bc, C + r0 * ld_bc, ld_bc, vec(w.ssm_d), st.ssm->scan(l, seq),
                y + r0 * di, 1, len, H, P, N, G},
               st.pool);
    });
    for (int64_t i = 0; i < n; ++i) {  // y *= silu(z)
      const float* zi = z + i * wd.in_proj;
      float* yi = y + i * di;
      for (int64_t j = 0; j < di; ++j) yi[j] *= zi[j] / (1.0f + std::exp(-zi[j]));
    }
    if (m2) grouped_rms_norm(y, vec(w.ssm_norm), c.norm_eps, n, G, di / G);
    linear(w.ssm_out, Tensor(), y, n, st.h, st, "ssm_out");
    add_inplace(st.x, st.h, n * c.dim);
  }

  // Training passes: TrainModel does not take state-space architectures yet (it says so before
  // any pass runs), so these are never reached.
  std::vector<SavedSlot> saved(const ModelConfig&, int64_t, int64_t) const override { return {}; }
  std::vector<ScratchSlot> scratch(const ModelConfig&, int64_t, int64_t) const override {
    return {};
  }
  void forward(const LayerPass&) const override { unsupported(); }
  void backward(const LayerPass&) const override { unsupported(); }
  void recompute(const LayerPass&, bool) const override { unsupported(); }

 private:
  // Mamba-2's norm: each of the G groups of a row normalised on its own, times its weights.
  static void grouped_rms_norm(float* y, const float* w, float eps, int64_t n, int64_t groups,
                               int64_t width) {
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t i = 0; i < n; ++i) {
        float* r = y + (i * groups + g) * width;
        rms_norm(r, w + g * width, eps, r, 1, width);
      }
  }
  [[noreturn]] static void unsupported() {
    throw Error("[ssm] training state-space layers is not supported");
  }
};

}  // namespace

const LayerType& ssm_layer() {
  static const SsmLayer layer;
  return layer;
}

int64_t ssm_scratch_floats(const ModelConfig& c, int64_t n) {
  if (!c.ssm()) return 0;
  const Widths w = widths(c);
  return n * (w.in_proj + w.conv + w.xdb + w.dt + w.y);
}

}  // namespace nexus
