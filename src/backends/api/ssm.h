// Arguments of the selective state-space ops (ops/ssm.h): the causal depthwise convolution of the
// Mamba mixers and their selective scan, forward and backward. Rows are tokens; b sequences of t
// tokens each lie one after another.
#pragma once

#include <cstdint>

namespace nexus {

// Causal depthwise conv1d with its rolling state, then SiLU: for each sequence and channel c,
// pre[i][c] = bias[c] + sum_j w[c][j] * u[i + j][c], where u is the sequence's k - 1 state rows
// followed by its x rows, and y = silu(pre).
struct SsmConvArgs {
  const float* x;     // [b * t] rows of ld_x floats, the channels first
  int64_t ld_x;
  float* state;       // [b][k - 1][channels], oldest row first; replaced by the last k - 1 rows
                      // of u. Null: zeros, nothing kept (training).
  const float* w;     // [channels][k]
  const float* bias;  // [channels]
  float* pre;         // [b * t][channels] before the activation (null: not kept)
  float* y;           // [b * t][channels]
  int64_t b, t, channels, k;
};

// The conv's backward (state zero at the start, as in training): dx written, dw and dbias
// accumulated.
struct SsmConvBackwardArgs {
  const float* dy;    // [b * t][channels]: d loss / d y
  const float* x;     // the forward's input
  int64_t ld_x;
  const float* pre;   // the forward's pre-activation
  const float* w;
  float* dx;          // [b * t] rows of ld_dx floats, the channels first
  int64_t ld_dx;
  float* dw;          // [channels][k]
  float* dbias;       // [channels]
  int64_t b, t, channels, k;
};

// Selective scan: per sequence and head h (of group g = h / (heads / groups)), from state s,
//   s[h][p][n] = exp(dt[i][h] * a[h][n or 0]) * s[h][p][n] + dt[i][h] * x[i][h][p] * B[i][g][n]
//   y[i][h][p] = sum_n s[h][p][n] * C[i][g][n] + d[h] * x[i][h][p].
// Mamba-2: heads of head_dim channels, one decay per head (a_width 1). Mamba-1: every channel is a
// head of one (head_dim 1) with a decay per state entry (a_width = state_size), one group.
struct SsmScanArgs {
  const float* x;     // [b * t] rows of ld_x floats: heads * head_dim
  int64_t ld_x;
  const float* dt;    // [b * t] rows of ld_dt floats: heads step sizes (softplus applied)
  int64_t ld_dt;
  const float* a;     // [heads][a_width], negative
  int64_t a_width;
  const float* B;     // [b * t] rows of ld_bc floats: groups * state_size
  const float* C;
  int64_t ld_bc;
  const float* d;     // [heads] (null: no skip term)
  float* state;       // [b][heads][head_dim][state_size], in and out; null: zeros, not kept
  float* y;           // [b * t][heads * head_dim]
  int64_t b, t, heads, head_dim, state_size, groups;
};

// The scan's backward from a zero state: dx, ddt, dB and dC written in the forward's row layouts
// (their ld_*), da and dd accumulated.
struct SsmScanBackwardArgs {
  SsmScanArgs fwd;    // the forward's inputs (state and y unused)
  const float* dy;    // [b * t][heads * head_dim]
  float* dx;          // rows of fwd.ld_x
  float* ddt;         // rows of fwd.ld_dt
  float* dB;          // rows of fwd.ld_bc
  float* dC;
  float* da;          // [heads][a_width]
  float* dd;          // [heads] (null when fwd.d is)
};

}  // namespace nexus
