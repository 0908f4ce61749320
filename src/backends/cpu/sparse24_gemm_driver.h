// The loop nest both 2:4 prefill kernels share (sparse24.h, gemm_2of4_*): panels of tokens
// transposed once, rows in passes of K::kRows over K::kColumns columns at a time, and the rows'
// sums written into y a token at a time. Included only by sparse24_gemm_avx2.cc and
// sparse24_gemm_avx512.cc, each instantiating it with a kernel struct of its own anonymous
// namespace (no instantiation shared between files compiled for different ISAs).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/sparse24.h"

namespace nexus::cpu {

// K: kPanel (tokens per panel), kRows, kColumns, the value tags F32/Half/BHalf, and
// rows<V>(w, w_stride, c0, c1, panel, part, r0, r1), which adds columns [c0, c1) of rows
// [r0, r1) times the panel into part[(r - r0) * kPanel + t] (set, not added, when c0 is 0).
template <class K>
void gemm_2of4_driver(DType t, const uint8_t* w, size_t w_stride, int64_t k, const float* x,
                      int64_t n, float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  // Grown once per thread to the widest panel seen.
  thread_local std::vector<float> panel, part;
  if (panel.size() < static_cast<size_t>(k * K::kPanel)) panel.resize(k * K::kPanel);
  if (part.size() < static_cast<size_t>(K::kRows * K::kPanel)) part.resize(K::kRows * K::kPanel);
  for (int64_t t0 = 0; t0 < n; t0 += K::kPanel) {
    const int64_t nt = std::min(K::kPanel, n - t0);
    // x[(t0 + i) * k + c] into panel[c * kPanel + i], zeros past nt.
    for (int64_t c = 0; c < k; ++c) {
      float* p = panel.data() + c * K::kPanel;
      for (int64_t i = 0; i < nt; ++i) p[i] = x[(t0 + i) * k + c];
      std::fill(p + nt, p + K::kPanel, 0.0f);
    }
    float* yt = y + t0 * y_stride;
    for (int64_t rb = r0; rb < r1; rb += K::kRows) {
      const int64_t re = std::min(r1, rb + K::kRows);
      for (int64_t c0 = 0; c0 < k; c0 += K::kColumns) {
        const int64_t c1 = std::min(k, c0 + K::kColumns);
        switch (t) {
          case DType::kF16_2of4:
            K::template rows<typename K::Half>(w, w_stride, c0, c1, panel.data(), part.data(), rb,
                                               re);
            break;
          case DType::kBF16_2of4:
            K::template rows<typename K::BHalf>(w, w_stride, c0, c1, panel.data(), part.data(), rb,
                                                re);
            break;
          default:
            K::template rows<typename K::F32>(w, w_stride, c0, c1, panel.data(), part.data(), rb,
                                              re);
            break;
        }
      }
      // The rows' sums into y a token at a time: y's rows are y_stride floats apart, a power of
      // two in many models, where writing a row's tokens one by one would meet in one cache set
      // (2x slower at 2,048).
      for (int64_t i = 0; i < nt; ++i)
        for (int64_t r = rb; r < re; ++r) yt[i * y_stride + r] = part[(r - rb) * K::kPanel + i];
    }
  }
}

}  // namespace nexus::cpu
