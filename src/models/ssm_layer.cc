// The Mamba block, at inference and in training. Per layer: h = rmsnorm(x); the input projection; the causal conv
// (with each sequence's rolling conv state) and SiLU; dt = softplus(.. + bias); the selective
// scan from each sequence's state; y * silu(z) (mamba2: then the grouped RMSNorm); the output
// projection added to x. Mamba-1 gets dt, B and C from the conv output through ssm_x and ssm_dt;
// Mamba-2 takes them from the input projection (z | x B C | dt) and has one decay per head.
#include "models/ssm_layer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "models/forward.h"
#include "models/transformer_layer.h"
#include "ops/dense.h"
#include "ops/elementwise.h"
#include "ops/ssm.h"
#include "ops/train_ops.h"

namespace nexus {
namespace {

const float* vec(const Tensor& t) { return t.data_as<const float>(); }

// Widths of one token's working rows.
struct Widths {
  int64_t in_proj, conv, xdb, dt, y;
};

Widths widths(const ModelConfig& c) {
  const bool m2 = c.mamba2_mixer();
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
    const bool m2 = c.mamba2_mixer();
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
      ssm_conv({xin + r0 * wd.in_proj, wd.in_proj, st.ssm->conv(st.state_index(l), seq), vec(w.ssm_conv1d),
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
                B + r0 * ld_bc, C + r0 * ld_bc, ld_bc, vec(w.ssm_d), st.ssm->scan(st.state_index(l), seq),
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
    if (!w.w_gate.empty()) swiglu_ffn_infer(c, w, st);  // hybrids: the layer's feed-forward
  }

  // Training: b sequences of t tokens from a zero state. The input projection's output is kept
  // (kInput) and the scan's output (kOutput); the rest is cheap to rebuild from them.
  std::vector<SavedSlot> saved(const ModelConfig& c, int64_t b, int64_t t) const override {
    const int64_t n = b * t, di = c.ssm_inner;
    const bool m2 = c.mamba2_mixer();
    const Widths wd = widths(c);
    return {
        {"rstd", n, Saved::kStat},
        {"ln", n * c.dim, Saved::kWork},
        {"zx", n * wd.in_proj, Saved::kInput},
        {"pre", n * wd.conv, Saved::kWork},
        {"xc", n * wd.conv, Saved::kWork},
        {"xdb", m2 ? 0 : n * wd.xdb, Saved::kWork},
        {"dtr", m2 ? 0 : n * c.ssm_dt_rank, Saved::kWork},
        {"dtraw", n * dt_width(c), Saved::kWork},
        {"dt", n * dt_width(c), Saved::kWork},
        {"y", n * di, Saved::kOutput},
        {"g", n * di, Saved::kWork},
        {"rstdg", m2 ? n * c.ssm_groups : 0, Saved::kStat},
        {"xhat", m2 ? n * di : 0, Saved::kWork},
        {"yn", m2 ? n * di : 0, Saved::kWork},
        // hybrids' feed-forward: the residual after the mixer, its norm, gate, up, activation
        {"mid", ffn(c) ? n * c.dim : 0, Saved::kStat},
        {"ln2", ffn(c) ? n * c.dim : 0, Saved::kWork},
        {"rstd2", ffn(c) ? n : 0, Saved::kStat},
        {"fg", n * ffn(c), Saved::kInput},
        {"fu", n * ffn(c), Saved::kInput},
        {"hact", n * ffn(c), Saved::kWork},
    };
  }

  std::vector<ScratchSlot> scratch(const ModelConfig& c, int64_t b, int64_t t) const override {
    const int64_t n = b * t, di = c.ssm_inner;
    const bool m2 = c.mamba2_mixer();
    const Widths wd = widths(c);
    return {{"dzx", n * wd.in_proj},     {"dxc", n * wd.conv},
            {"dxdb", m2 ? 0 : n * wd.xdb}, {"ddtr", m2 ? 0 : n * c.ssm_dt_rank},
            {"ddt", n * dt_width(c)},      {"dy", n * di},
            {"dg", n * di},                {"dhact", n * ffn(c)},
            {"dfu", n * ffn(c)}};
  }

  void forward(const LayerPass& p) const override {
    const ModelConfig& c = *p.cfg;
    const int64_t n = p.n(), d = c.dim;
    const TrainShape s = train_shape(c);
    float* const* a = p.a;
    // Mixed precision: kept activations are rounded (and copied to 16 bits) before anything reads
    // them, so a block restored for its backward rebuilds the same values (recompute()).
    norm_forward(c, a[kLn], nullptr, a[kRstd], p.x, p.weight(&LayerWeights::attn_norm), nullptr,
                 n, p.pool);
    p.keep_only(a[kLn], n * d);
    matmul_forward(a[kZx], a[kLn], p.weight(&LayerWeights::ssm_in), n, d, s.w.in_proj, p.pool);
    p.keep(kZx, n * s.w.in_proj);
    rebuild(p, s, /*scan=*/true, /*keep_scan=*/true);
    const float* mixed = s.m2 ? a[kYn] : a[kG];
    if (!ffn(c)) {
      if (p.y)
        matmul_forward(p.y, mixed, p.weight(&LayerWeights::ssm_out), n, c.ssm_inner, d, p.pool,
                       false, p.x);
      return;
    }
    // Hybrids: mid = x + mixer, then out = mid + down(silu(gate(ln2)) * up(ln2)).
    const int64_t f = c.ffn_dim;
    matmul_forward(a[kMid], mixed, p.weight(&LayerWeights::ssm_out), n, c.ssm_inner, d, p.pool,
                   false, p.x);
    norm_forward(c, a[kLn2], nullptr, a[kRstd2], a[kMid], p.weight(&LayerWeights::ffn_norm),
                 nullptr, n, p.pool);
    p.keep_only(a[kLn2], n * d);
    matmul_forward(a[kFg], a[kLn2], p.weight(&LayerWeights::w_gate), n, d, f, p.pool);
    matmul_forward(a[kFu], a[kLn2], p.weight(&LayerWeights::w_up), n, d, f, p.pool);
    p.keep(kFg, n * f);
    p.keep(kFu, n * f);
    swiglu_forward(a[kHact], a[kFg], a[kFu], n * f, p.pool);
    p.keep_only(a[kHact], n * f);
    if (p.y)
      matmul_forward(p.y, a[kHact], p.weight(&LayerWeights::w_down), n, f, d, p.pool, false,
                     a[kMid]);
  }

  void backward(const LayerPass& p) const override {
    const ModelConfig& c = *p.cfg;
    const int64_t n = p.n(), d = c.dim, di = c.ssm_inner;
    const TrainShape s = train_shape(c);
    float* const* a = p.a;
    float* const* sc = p.scratch;
    ThreadPool* pool = p.pool;
    if (ffn(c)) {  // the feed-forward half first: dres becomes d mid
      const int64_t f = c.ffn_dim;
      p.zero(sc[kDhact], n * f);
      matmul_backward(sc[kDhact], p.grad(&LayerWeights::w_down), p.dres, a[kHact],
                      p.weight(&LayerWeights::w_down), n, f, d, pool);
      p.round_grad(sc[kDhact], n * f);
      // hact is dead now: it takes the gate's gradient.
      swiglu_backward(a[kHact], sc[kDfu], sc[kDhact], a[kFg], a[kFu], n * f, pool);
      p.round_grad(a[kHact], n * f);
      p.round_grad(sc[kDfu], n * f);
      p.zero(p.dln, n * d);
      matmul_backward(p.dln, p.grad(&LayerWeights::w_gate), a[kHact], a[kLn2],
                      p.weight(&LayerWeights::w_gate), n, d, f, pool);
      matmul_backward(p.dln, p.grad(&LayerWeights::w_up), sc[kDfu], a[kLn2],
                      p.weight(&LayerWeights::w_up), n, d, f, pool);
      p.round_grad(p.dln, n * d);
      norm_backward(c, p.dres, p.grad(&LayerWeights::ffn_norm), nullptr, p.dln, a[kMid],
                    p.weight(&LayerWeights::ffn_norm), nullptr, a[kRstd2], n, pool);
      p.round_grad(p.dres, n * d);
    }
    // out = x + yn W_out (mamba: g W_out).
    p.zero(sc[kDg], n * di);
    if (s.m2) {
      p.zero(sc[kDy], n * di);  // d yn, then d g below
      matmul_backward(sc[kDy], p.grad(&LayerWeights::ssm_out), p.dres, a[kYn],
                      p.weight(&LayerWeights::ssm_out), n, di, d, pool);
      group_norm_backward(sc[kDg], p.grad(&LayerWeights::ssm_norm), sc[kDy], a[kG], a[kXhat],
                          p.weight(&LayerWeights::ssm_norm), a[kRstdg], n, c.ssm_groups,
                          di / c.ssm_groups, pool);
    } else {
      matmul_backward(sc[kDg], p.grad(&LayerWeights::ssm_out), p.dres, a[kG],
                      p.weight(&LayerWeights::ssm_out), n, di, d, pool);
    }
    // g = y * silu(z): d y to dy, d z into its columns of d zx.
    float* dzx = sc[kDzx];
    const float* z = a[kZx] + s.z_off;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < di; ++j) {
        const float zv = z[i * s.w.in_proj + j], sg = 1.0f / (1.0f + std::exp(-zv));
        const float dgv = sc[kDg][i * di + j];
        sc[kDy][i * di + j] = dgv * zv * sg;
        dzx[i * s.w.in_proj + s.z_off + j] =
            dgv * a[kY][i * di + j] * sg * (1.0f + zv * (1.0f - sg));
      }
    p.round_grad(sc[kDy], n * di);
    p.round_grad(dzx, n * s.w.in_proj);  // its z columns; the rest is written below
    // The scan: d x (and the skip term) into d xc, d dt, d B and d C, and A's and D's gradients.
    SsmScanBackwardArgs sb{scan_args(p, s), sc[kDy], sc[kDxc], sc[kDdt], nullptr, nullptr,
                           p.grad(&LayerWeights::ssm_a), p.grad(&LayerWeights::ssm_d)};
    float* dbc = s.m2 ? sc[kDxc] + di : sc[kDxdb] + c.ssm_dt_rank;
    sb.dB = dbc;
    sb.dC = dbc + s.groups * c.ssm_state;
    ssm_scan_backward(sb, pool);
    p.round_grad(sc[kDxc], n * s.w.conv);
    // dt = softplus(dtraw): d dtraw = d dt * sigmoid(dtraw) (1 above softplus's threshold).
    const int64_t nd = n * dt_width(c);
    for (int64_t i = 0; i < nd; ++i) {
      const float v = a[kDtraw][i];
      sc[kDdt][i] *= v > 20.0f ? 1.0f : 1.0f / (1.0f + std::exp(-v));
    }
    float* dtb = p.grad(&LayerWeights::ssm_dt_b);
    if (s.m2) {  // dtraw = zx's dt columns + bias
      const int64_t H = c.ssm_dt_rank, off = di + s.w.conv;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t h = 0; h < H; ++h) {
          dzx[i * s.w.in_proj + off + h] = sc[kDdt][i * H + h];
          dtb[h] += sc[kDdt][i * H + h];
        }
    } else {  // dtraw = dtr W_dt + bias, [dtr | B | C] = xc W_x
      const int64_t R = c.ssm_dt_rank;
      p.zero(sc[kDdtr], n * R);
      matmul_backward(sc[kDdtr], p.grad(&LayerWeights::ssm_dt), sc[kDdt], a[kDtr],
                      p.weight(&LayerWeights::ssm_dt), n, R, di, pool, false, dtb);
      for (int64_t i = 0; i < n; ++i)
        std::copy(sc[kDdtr] + i * R, sc[kDdtr] + (i + 1) * R, sc[kDxdb] + i * s.w.xdb);
      matmul_backward(sc[kDxc], p.grad(&LayerWeights::ssm_x), sc[kDxdb], a[kXc],
                      p.weight(&LayerWeights::ssm_x), n, di, s.w.xdb, pool);
    }
    // The conv (its output's gradient is d xc) into the x (B, C) columns of d zx.
    ssm_conv_backward({sc[kDxc], a[kZx] + s.x_off, s.w.in_proj, a[kPre],
                       p.weight(&LayerWeights::ssm_conv1d), dzx + s.x_off, s.w.in_proj,
                       p.grad(&LayerWeights::ssm_conv1d), p.grad(&LayerWeights::ssm_conv1d_b),
                       p.b, p.t, s.w.conv, c.ssm_conv},
                      pool);
    // zx = ln W_in; ln = rmsnorm(x): d x adds to dres (the residual's own gradient).
    p.round_grad(dzx, n * s.w.in_proj);
    p.zero(p.dln, n * d);
    matmul_backward(p.dln, p.grad(&LayerWeights::ssm_in), dzx, a[kLn],
                    p.weight(&LayerWeights::ssm_in), n, d, s.w.in_proj, pool);
    p.round_grad(p.dln, n * d);
    norm_backward(c, p.dres, p.grad(&LayerWeights::attn_norm), nullptr, p.dln, p.x,
                  p.weight(&LayerWeights::attn_norm), nullptr, a[kRstd], n, pool);
    p.round_grad(p.dres, n * d);
  }

  void recompute(const LayerPass& p, bool selective) const override {
    const ModelConfig& c = *p.cfg;
    const int64_t n = p.n();
    norm_forward(c, p.a[kLn], nullptr, p.a[kRstd], p.x, p.weight(&LayerWeights::attn_norm),
                 nullptr, n, p.pool);
    p.keep_only(p.a[kLn], n * c.dim);
    rebuild(p, train_shape(c), selective, /*keep_scan=*/false);
    if (ffn(c)) {
      norm_forward(c, p.a[kLn2], nullptr, p.a[kRstd2], p.a[kMid],
                   p.weight(&LayerWeights::ffn_norm), nullptr, n, p.pool);
      p.keep_only(p.a[kLn2], n * c.dim);
      swiglu_forward(p.a[kHact], p.a[kFg], p.a[kFu], n * c.ffn_dim, p.pool);
      p.keep_only(p.a[kHact], n * c.ffn_dim);
    }
  }

 private:
  // Mamba-2's norm at inference: each of the G groups of a row normalised on its own.
  static void grouped_rms_norm(float* y, const float* w, float eps, int64_t n, int64_t groups,
                               int64_t width) {
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t i = 0; i < n; ++i) {
        float* r = y + (i * groups + g) * width;
        rms_norm(r, w + g * width, eps, r, 1, width);
      }
  }

  enum Act { kRstd, kLn, kZx, kPre, kXc, kXdb, kDtr, kDtraw, kDt, kY, kG, kRstdg, kXhat, kYn,
             kMid, kLn2, kRstd2, kFg, kFu, kHact };
  enum Scratch { kDzx, kDxc, kDxdb, kDdtr, kDdt, kDy, kDg, kDhact, kDfu };

  // The feed-forward width of a hybrid's layers (0: the block has none).
  static int64_t ffn(const ModelConfig& c) { return c.hybrid() ? c.ffn_dim : 0; }

  struct TrainShape {
    bool m2;
    Widths w;
    int64_t x_off, z_off, groups;
  };
  static int64_t dt_width(const ModelConfig& c) {
    return c.mamba2_mixer() ? c.ssm_dt_rank : c.ssm_inner;
  }
  static TrainShape train_shape(const ModelConfig& c) {
    const bool m2 = c.mamba2_mixer();
    return {m2, widths(c), m2 ? c.ssm_inner : 0, m2 ? 0 : c.ssm_inner, c.ssm_n_groups()};
  }
  static SsmScanArgs scan_args(const LayerPass& p, const TrainShape& s) {
    const ModelConfig& c = *p.cfg;
    float* const* a = p.a;
    const float* bc = s.m2 ? a[kXc] + c.ssm_inner : a[kXdb] + c.ssm_dt_rank;
    const int64_t ld_bc = s.m2 ? s.w.conv : s.w.xdb;
    return {a[kXc],        s.w.conv, a[kDt],       dt_width(c), p.weight(&LayerWeights::ssm_a),
            s.m2 ? 1 : c.ssm_state,  bc,           bc + s.groups * c.ssm_state, ld_bc,
            p.weight(&LayerWeights::ssm_d), nullptr, a[kY],     p.b,         p.t,
            c.ssm_heads(), c.ssm_head_dim(), c.ssm_state, s.groups};
  }

  // Everything after the input projection: the conv, dt, (the scan), the gate and mamba2's norm,
  // each rounded to the pass's precision as it is made. keep_scan: the forward's scan output is
  // kept (a 16-bit copy under mixed precision); a recompute's is only rounded.
  static void rebuild(const LayerPass& p, const TrainShape& s, bool scan, bool keep_scan) {
    const ModelConfig& c = *p.cfg;
    const int64_t n = p.n(), di = c.ssm_inner;
    float* const* a = p.a;
    ssm_conv({a[kZx] + s.x_off, s.w.in_proj, nullptr, p.weight(&LayerWeights::ssm_conv1d),
              p.weight(&LayerWeights::ssm_conv1d_b), a[kPre], a[kXc], p.b, p.t, s.w.conv,
              c.ssm_conv},
             p.pool);
    p.keep_only(a[kPre], n * s.w.conv);
    p.keep_only(a[kXc], n * s.w.conv);
    const float* dtb = p.weight(&LayerWeights::ssm_dt_b);
    if (s.m2) {
      const int64_t H = c.ssm_dt_rank, off = di + s.w.conv;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t h = 0; h < H; ++h) a[kDtraw][i * H + h] = a[kZx][i * s.w.in_proj + off + h] + dtb[h];
    } else {
      const int64_t R = c.ssm_dt_rank;
      matmul_forward(a[kXdb], a[kXc], p.weight(&LayerWeights::ssm_x), n, di, s.w.xdb, p.pool);
      p.keep_only(a[kXdb], n * s.w.xdb);
      for (int64_t i = 0; i < n; ++i)
        std::copy(a[kXdb] + i * s.w.xdb, a[kXdb] + i * s.w.xdb + R, a[kDtr] + i * R);
      matmul_forward(a[kDtraw], a[kDtr], p.weight(&LayerWeights::ssm_dt), n, R, di, p.pool, false,
                     nullptr, dtb);
    }
    const int64_t nd = n * dt_width(c);
    p.keep_only(a[kDtraw], nd);
    for (int64_t i = 0; i < nd; ++i) a[kDt][i] = softplus(a[kDtraw][i]);
    p.keep_only(a[kDt], nd);
    if (scan) {
      ssm_scan(scan_args(p, s), p.pool);
      if (keep_scan)
        p.keep(kY, n * di);
      else
        p.keep_only(a[kY], n * di);
    }
    const float* z = a[kZx] + s.z_off;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < di; ++j) {
        const float zv = z[i * s.w.in_proj + j];
        a[kG][i * di + j] = a[kY][i * di + j] * (zv / (1.0f + std::exp(-zv)));
      }
    p.keep_only(a[kG], n * di);
    if (s.m2) {
      group_norm_forward(a[kYn], a[kXhat], a[kRstdg], a[kG], p.weight(&LayerWeights::ssm_norm), n,
                         c.ssm_groups, di / c.ssm_groups, c.norm_eps, p.pool);
      p.keep_only(a[kXhat], n * di);
      p.keep_only(a[kYn], n * di);
    }
  }

  // Mamba-2's grouped RMSNorm through the RMSNorm op: rows of one group, normalised with unit
  // weights (xhat), then each group scaled by its own weights.
  static void group_norm_forward(float* out, float* xhat, float* rstd, const float* x,
                                 const float* w, int64_t n, int64_t groups, int64_t width,
                                 float eps, ThreadPool* pool) {
    const std::vector<float> ones(static_cast<size_t>(width), 1.0f);
    rmsnorm_forward(xhat, rstd, x, ones.data(), n * groups, width, eps, pool);
    for (int64_t r = 0; r < n * groups; ++r) {
      const float* wg = w + (r % groups) * width;
      for (int64_t j = 0; j < width; ++j) out[r * width + j] = xhat[r * width + j] * wg[j];
    }
  }
  // dx (zeroed here) and dw (accumulated) from d out.
  static void group_norm_backward(float* dx, float* dw, float* dout, const float* x,
                                  const float* xhat, const float* w, const float* rstd, int64_t n,
                                  int64_t groups, int64_t width, ThreadPool* pool) {
    for (int64_t r = 0; r < n * groups; ++r) {
      const int64_t g = r % groups;
      for (int64_t j = 0; j < width; ++j) {
        dw[g * width + j] += dout[r * width + j] * xhat[r * width + j];
        dout[r * width + j] *= w[g * width + j];  // now d xhat
      }
    }
    const std::vector<float> ones(static_cast<size_t>(width), 1.0f);
    std::vector<float> dones(static_cast<size_t>(width), 0.0f);
    std::fill(dx, dx + n * groups * width, 0.0f);
    rmsnorm_backward(dx, dones.data(), dout, x, ones.data(), rstd, n * groups, width, pool);
  }
};

}  // namespace

const LayerType& ssm_layer() {
  static const SsmLayer layer;
  return layer;
}

int64_t ssm_scratch_floats(const ModelConfig& c, int64_t n) {
  if (!c.has_recurrent()) return 0;
  const Widths w = widths(c);
  return n * (w.in_proj + w.conv + w.xdb + w.dt + w.y);
}

}  // namespace nexus
