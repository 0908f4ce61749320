// Training op front-ends (see train_ops.h). GEMMs go to our f32 GEMM (cpu/gemm_f32.h), or to
// OpenBLAS without AVX2 (one single-threaded call per pool thread either way);
// attention (OpenBLAS GEMMs or register kernels), cross-entropy and SwiGLU dispatch to
// train_kernels.h (AVX2 or scalar); norms and RoPE are plain loops that accumulate in f32 except
// the norms' row reductions (double). Row loops are split over the pool.
#include "nexus/train/train_ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/gemm_amx.h"
#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/quant.h"
#include "nexus/core/thread_pool.h"
#include "nexus/status.h"
#include "ops/activation.h"
#include "ops/embedding.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "train/train_kernels.h"
#include "train/train_parallel.h"

namespace nexus::train {

using par::for_aligned;
using par::for_items;
using par::for_ranges;
using par::use_avx2;

namespace {

// Splits [0, n) into one contiguous share per pool thread, each a multiple of kShareAlign but the
// last, and calls fn(begin, end) on every thread that has a non-empty share; inline without a
// pool or when a share would be under kMinShareMacs multiply-adds (`macs` per unit of n). The
// GEMMs below run each share on its own thread (TrainModel keeps OpenBLAS, where it is used, at
// one thread): threaded OpenBLAS left a worker spinning for up to 2^28 cycles after every call,
// which on a two-core machine took half the CPU from the pool's element-wise ops between the
// GEMMs.
constexpr int64_t kShareAlign = 16;  // share sizes a multiple of the GEMM kernels' widths
// With our GEMM (cpu/gemm_f32.h) a share computes every element in the order the whole GEMM does.
// OpenBLAS does not (NEXUS_NO_F32_GEMM=1): on AVX-512 builds its small-matrix kernels (products of
// up to 100^3 multiply-adds) sum in another order, and its Zen (AVX2) kernels round differently
// for different m or n at any size; small GEMMs stay whole either way.
constexpr int64_t kMinShareMacs = int64_t{1} << 23;

// Our GEMM on the pool's dynamic blocks (cpu::gemm_f32_pool, gemm_f32_pool_rows): where it is
// active and NEXUS_STATIC_GEMM_SHARES is not 1 (the static shares below, one per thread: the same
// bits; for measuring one against the other).
bool use_pooled() {
  static const bool on = cpu::gemm_f32_active() && !cpu::env_is_one("NEXUS_STATIC_GEMM_SHARES");
  return on;
}

// Whether [0, n) is worth splitting over the pool: two or more threads, and each thread's share
// at least kMinShareMacs multiply-adds (`macs` per unit of n).
bool worth_sharing(const ThreadPool* pool, int64_t n, int64_t macs) {
  return pool != nullptr && pool->size() > 1 && n >= 2 * kShareAlign &&
         n / pool->size() * macs >= kMinShareMacs;
}

template <typename Fn>
void gemm_shares(ThreadPool* pool, int64_t n, int64_t macs, const Fn& fn) {
  if (!worth_sharing(pool, n, macs)) {
    fn(int64_t{0}, n);
    return;
  }
  pool->run([&](int thread, int n_threads) {
    const int64_t share = (n / n_threads + kShareAlign - 1) / kShareAlign * kShareAlign;
    const int64_t begin = std::min(n, thread * share);
    const int64_t end = thread == n_threads - 1 ? n : std::min(n, begin + share);
    if (begin < end) fn(begin, end);
  });
}

// A GEMM [m x n] with inner size k goes to AMX when each operand element it converts to bf16
// (m k of A, k n of B) feeds at least this many flops (2 m n k): below it the conversion costs
// more than the tiles save (GPT-2's head in blocks of 166 rows: 332 flops per element).
constexpr int64_t kAmxFlopsPerElement = 512;

bool use_amx(bool bf16_operands, int64_t m, int64_t n, int64_t k) {
  return bf16_operands && cpu::amx_bf16_active() &&
         2 * m * n * k >= kAmxFlopsPerElement * (m + n) * k;
}

// C[m x n] (+)= op(A) op(B) on AMX tiles (cpu::gemm_bf16_amx_rows): op(A) is converted to bf16
// once, its rows split over the pool, into the calling thread's buffer; then each thread takes a
// share of C's columns and packs only its own columns of op(B). (Each thread converting op(A)
// itself cost GPT-2's bf16 step 7%.)
void amx_gemm(ThreadPool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              const float* a, int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c,
              int64_t ldc) {
  // A tall C (the head's d weight: 32000 x 288 for L15M) goes in shares of rows instead: each
  // thread converts only its own rows, and the small op(B) packed by both costs less than both
  // threads streaming all of op(A) (the L15M bf16 step 7% faster than by columns).
  if (pool != nullptr && pool->size() > 1 && m > 4 * n) {
    pool->run([&](int t, int nt) {
      const int64_t share = ((m + nt - 1) / nt + 31) / 32 * 32;
      const int64_t r0 = std::min(m, t * share), r1 = std::min(m, (t + 1) * share);
      if (r0 < r1)
        cpu::gemm_bf16_amx(trans_a, trans_b, r1 - r0, n, k, trans_a ? a + r0 : a + r0 * lda, lda, b,
                           ldb, accumulate, c + r0 * ldc, ldc);
    });
    return;
  }
  // The calling thread's buffer: the lambdas below run on the workers too, and a thread_local
  // named inside them would be each worker's own.
  thread_local std::vector<uint16_t> buffer;
  buffer.resize(cpu::bf16_rows_size(m, k));
  uint16_t* rows = buffer.data();
  const int64_t blocks = (m + 15) / 16;  // conversion units of 16 rows
  const int64_t padded = (m + 31) / 32 * 32;
  auto convert = [&](int64_t b0, int64_t b1) {
    cpu::convert_bf16_rows(trans_a, m, k, a, lda, 16 * b0, std::min(padded, 16 * b1), rows);
  };
  // The last unit also zeroes the padding rows up to a multiple of 32.
  if (pool != nullptr && pool->size() > 1)
    pool->run([&](int t, int nt) {
      convert(blocks * t / nt, t + 1 == nt ? (padded + 15) / 16 : blocks * (t + 1) / nt);
    });
  else
    convert(0, (padded + 15) / 16);
  // Shares of whole 32-column panels: a share ending inside a panel would send every block of
  // that panel through the edge path (L15M's 288 columns in two shares of 144: 3-5% slower).
  auto columns = [&](int64_t j0, int64_t j1) {
    if (j0 < j1)
      cpu::gemm_bf16_amx_rows(rows, m, k, trans_b, j1 - j0, trans_b ? b + j0 * ldb : b + j0, ldb,
                              accumulate, c + j0, ldc);
  };
  if (pool == nullptr || pool->size() == 1) return columns(0, n);
  pool->run([&](int t, int nt) {
    const int64_t share = ((n + nt - 1) / nt + 31) / 32 * 32;
    columns(std::min(n, t * share), std::min(n, (t + 1) * share));
  });
}

// dinp[n, c] += dout[n, oc] w[oc, c] with the inner dimension oc cut into fixed chunks when it is
// far longer than the output is wide (the output head: oc = the vocabulary, c = 288 or 768).
// Shares of dinp's 144 or 384 columns made every thread pack all of dout (512 x 32000 floats for
// L15M's head block); chunks of oc read each element of dout and w once. Every chunk goes to the
// calling thread's buffer, and the chunks are added to dinp in chunk order, so the result does not
// depend on the thread count (the chunks depend on the shape only). 6-10% faster per head block
// than the column shares (docs/KERNELS.md).
constexpr int64_t kSplitKRatio = 16;     // oc >= this many times c
constexpr int64_t kSplitKChunk = 16384;  // at most this many of oc per chunk

bool split_k(int64_t c, int64_t oc) { return oc >= kSplitKRatio * c && oc > kSplitKChunk; }

// Rows of d weight per GEMM call. OpenBLAS packs op(A) of dw += dout^T inp, up to 448 x ~18k
// floats, into its per-thread buffer, so one call over GPT-2's head share (25k vocabulary rows)
// touched ~25 MiB of it on each thread, for as long as the process lives; our GEMM packs all of a
// call's op(A). Calls of 1024 rows keep either under 3 MiB and run as fast as larger ones
// (docs/KERNELS.md). Each element sums over the same inner index in the same order whatever the
// calls' rows, so the bits are those of one call (MatmulWeightGradInRowCallsIsOneCall).
constexpr int64_t kDwRows = 1024;

void dinp_split_k(ThreadPool* pool, float* dinp, const float* dout, const float* w, int64_t n,
                  int64_t c, int64_t oc) {
  const int64_t chunks = (oc + kSplitKChunk - 1) / kSplitKChunk;
  const int64_t part = n * c;
  // Chunk j on OpenBLAS: partial_j [c x n] = (dout[:, chunk] w[chunk, :])^T, as w^T dout^T: it
  // runs the transposed product 4-7% faster on these shapes. Our GEMM (cpu/gemm_f32.h) takes the
  // chunk as it comes, dout[:, chunk] w[chunk, :], faster than either OpenBLAS form. Then chunk 0
  // adds straight into dinp (only its GEMM writes dinp until the partials are added), and
  // partial_j [n x c] holds chunk j >= 1: one partial less to store and add.
  const bool ours = cpu::gemm_f32_active();
  const int64_t first = ours ? 1 : 0;      // the first chunk that goes to a partial
  thread_local std::vector<float> buffer;  // the calling thread's (see amx_gemm)
  buffer.resize(static_cast<size_t>((chunks - first) * part));
  // (Through a pointer: a lambda naming the thread_local would reach each worker's own.)
  float* const partials = buffer.data();
  const auto partial = [&](int64_t j) { return partials + (j - first) * part; };
  const auto chunk_loop = [&](int t, int nt) {
    for (int64_t j = t; j < chunks; j += nt) {
      const int64_t k0 = oc * j / chunks, k1 = oc * (j + 1) / chunks;
      if (ours)
        cpu::gemm_f32(false, false, n, c, k1 - k0, dout + k0, oc, w + k0 * c, c, j == 0,
                      j == 0 ? dinp : partial(j), c);
      else
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, static_cast<int>(c), static_cast<int>(n),
                    static_cast<int>(k1 - k0), 1.0f, w + k0 * c, static_cast<int>(c), dout + k0,
                    static_cast<int>(oc), 0.0f, partial(j), static_cast<int>(n));
    }
  };
  // dinp[i][x] += the partials in chunk order: row by row ([n x c] partials), or, transposed, in
  // blocks of 16 rows i, so each line of a partial serves 16 of them.
  constexpr int64_t kRows = 16;
  const auto add_partials = [&](int64_t b0, int64_t b1) {
    for (int64_t i0 = b0 * kRows; i0 < std::min(n, b1 * kRows); i0 += kRows) {
      const int64_t i1 = std::min(n, i0 + kRows);
      for (int64_t j = first; j < chunks; ++j) {
        const float* pj = partial(j);
        if (ours) {
          for (int64_t i = i0; i < i1; ++i)
            kern::add_vectors_avx2(dinp + i * c, dinp + i * c, pj + i * c, c);
          continue;
        }
        for (int64_t x = 0; x < c; ++x)
          for (int64_t i = i0; i < i1; ++i) dinp[i * c + x] += pj[x * n + i];
      }
    }
  };
  const int64_t blocks = (n + kRows - 1) / kRows;
  if (pool == nullptr || pool->size() == 1) {
    chunk_loop(0, 1);
    add_partials(0, blocks);
    return;
  }
  pool->run(chunk_loop);
  pool->parallel_for(blocks, add_partials, 1);
}

// Whether a forward or d-input GEMM [n x ...] splits its rows (tokens) over the pool instead of its
// output columns. Each share is then a full-width GEMM over fewer tokens and packs the whole
// weight, where a column share packs every token's input: 4-15% faster on GPT-2 124M's and L15M's
// block GEMMs (docs/KERNELS.md). Columns stay where they measured as fast or faster: the output
// head's forward (oc >= 16 c), the d input when c >= 4 oc (GPT-2's down projection) and short
// batches. The shares still compute every element as the whole GEMM does (the same bits for any
// thread count).
bool split_rows(ThreadPool* pool, int64_t n, bool shape_ok) {
  return pool != nullptr && pool->size() > 1 && shape_ok && n >= 256 * pool->size();
}

// C[m x n] (+)= op(A)[m x k] op(B) on the calling thread (alpha 1, beta 0 or 1): our f32 GEMM
// (backends/cpu/gemm_f32.h: AVX-512 or AVX2) where it is active, else OpenBLAS. On AVX-512 ours
// runs the step's shapes faster than sgemm (docs/KERNELS.md, "Training f32 GEMM"); on AVX2 it runs
// the L15M step up to 10% slower than OpenBLAS, and is kept there because its results do not
// depend on the split (OpenBLAS's do). row_sums (A^T's row sums, our GEMM only: the caller passes
// it only when gemm_f32_active()) as in gemm_f32.
void gemm_on_thread(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                    int64_t lda, const float* b, int64_t ldb, bool accumulate, float* c,
                    int64_t ldc, float* row_sums = nullptr) {
  if (cpu::gemm_f32_active())
    return cpu::gemm_f32(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, row_sums);
  NEXUS_CHECK(row_sums == nullptr, "[train] row sums need our f32 GEMM");
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb),
              accumulate ? 1.0f : 0.0f, c, static_cast<int>(ldc));
}

// Our GEMM (only where gemm_f32_active()) over the whole pool with dynamically claimed blocks
// (cpu::gemm_f32_pool); inline on this thread when the pool is absent or a thread's share would be
// under kMinShareMacs multiply-adds, as gemm_shares decides. trans_c as in gemm_f32.
void gemm_pooled(ThreadPool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 const float* a, int64_t lda, const float* b, int64_t ldb, bool accumulate,
                 float* c, int64_t ldc, bool trans_c = false) {
  if (!worth_sharing(pool, n, m * k))
    return cpu::gemm_f32(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, nullptr,
                         trans_c);
  cpu::gemm_f32_pool(pool, trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc,
                     trans_c);
}

// The same in blocks of C's rows (cpu::gemm_f32_pool_rows): for the splits by rows (tokens, or a d
// weight's rows), where op(B) is packed whole by each thread once a pass. row_sums as in gemm_f32.
// Only while a pass of op(B) (counted at kWholeBPassK, AVX2's pass of k; AVX-512 passes are 768,
// and the threshold was measured on AVX2 only) is at most kMaxWholeB: each thread's packed copy is
// re-read for every block of rows, and larger copies (GPT-2's 3072-wide weights: 4.7 MB a thread)
// crowded the shared L3 (its step 3-12% slower than with the static shares); those keep the
// static row shares.
constexpr int64_t kMaxWholeB = int64_t{2} << 20;
constexpr int64_t kWholeBPassK = 384;
void gemm_pooled_rows(ThreadPool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                      const float* a, int64_t lda, const float* b, int64_t ldb, bool accumulate,
                      float* c, int64_t ldc, float* row_sums = nullptr) {
  if (!worth_sharing(pool, m, n * k))
    return cpu::gemm_f32(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, row_sums);
  if (n * std::min(k, kWholeBPassK) * static_cast<int64_t>(sizeof(float)) > kMaxWholeB) {
    // Static row shares: every thread packs op(B) block by block for all its rows.
    return gemm_shares(pool, m, n * k, [&](int64_t i0, int64_t i1) {
      cpu::gemm_f32(trans_a, trans_b, i1 - i0, n, k, trans_a ? a + i0 : a + i0 * lda, lda, b, ldb,
                    accumulate, c + i0 * ldc, ldc, row_sums ? row_sums + i0 : nullptr);
    });
  }
  cpu::gemm_f32_pool_rows(pool, trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc,
                          row_sums);
}

// Columns [o0, o1) of every row of out [n, oc] = add [n, oc] + bias [oc] (either may be null).
// Vectorised: GCC -O2 leaves such loops scalar (~1 value a cycle, as the old bias pass ran).
void fill_output(float* out, const float* add, const float* bias, int64_t n, int64_t oc, int64_t o0,
                 int64_t o1) {
  const auto add_vectors = use_avx2() ? kern::add_vectors_avx2 : kern::add_vectors_scalar;
  const size_t bytes = static_cast<size_t>(o1 - o0) * sizeof(float);
  for (int64_t i = 0; i < n; ++i) {
    float* o = out + i * oc + o0;
    if (add && bias)
      add_vectors(o, add + i * oc + o0, bias + o0, o1 - o0);
    else
      std::memcpy(o, add ? add + i * oc + o0 : bias + o0, bytes);
  }
}

}  // namespace

void matmul_forward(float* out, const float* inp, const float* w, int64_t n, int64_t c, int64_t oc,
                    ThreadPool* pool, bool bf16_operands, const float* add_rows,
                    const float* bias) {
  NEXUS_TRAIN_OP("train.matmul", 4 * (n * c + c * oc + n * oc), 2 * n * c * oc);
  const bool filled = add_rows != nullptr || bias != nullptr;
  const auto fill_rows = [&](int64_t i0, int64_t i1) {  // rows [i0, i1), every column
    fill_output(out + i0 * oc, add_rows ? add_rows + i0 * oc : nullptr, bias, i1 - i0, oc, 0, oc);
  };
  if (use_amx(bf16_operands, n, oc, c)) {
    if (filled) for_ranges(pool, n, 16, fill_rows);
    return amx_gemm(pool, false, true, n, oc, c, inp, c, w, c, filled, out, oc);
  }
  if (split_rows(pool, n, oc < 16 * c) && use_pooled()) {
    if (filled) for_ranges(pool, n, 16, fill_rows);  // blocks of the rows (tokens)
    return gemm_pooled_rows(pool, false, true, n, oc, c, inp, c, w, c, filled, out, oc);
  }
  if (split_rows(pool, n, oc < 16 * c)) {  // shares of the rows (tokens)
    gemm_shares(pool, n, c * oc, [&](int64_t i0, int64_t i1) {
      if (filled) fill_rows(i0, i1);
      gemm_on_thread(false, true, i1 - i0, oc, c, inp + i0 * c, c, w, c, filled, out + i0 * oc, oc);
    });
    return;
  }
  // Shares of the output columns (rows of w): the output head.
  if (use_pooled()) {
    if (filled) for_ranges(pool, n, 16, fill_rows);
    return gemm_pooled(pool, false, true, n, oc, c, inp, c, w, c, filled, out, oc);
  }
  gemm_shares(pool, oc, n * c, [&](int64_t o0, int64_t o1) {
    if (filled) fill_output(out, add_rows, bias, n, oc, o0, o1);
    gemm_on_thread(false, true, n, o1 - o0, c, inp, c, w + o0 * c, c, filled, out + o0, oc);
  });
}

void matmul_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                     int64_t n, int64_t c, int64_t oc, ThreadPool* pool, bool bf16_operands,
                     float* dbias) {
  NEXUS_TRAIN_OP("train.matmul_bwd", 4 * (2 * n * c + c * oc + n * oc),
                 2 * n * c * oc * ((dinp != nullptr) + (dw != nullptr)));
  // dinp[n, c] += dout[n, oc] w[oc, c], in shares of dinp's columns (the output head's: with our
  // pooled GEMM in blocks of its rows, else in chunks of oc, dinp_split_k). The head's in blocks
  // of rows: each thread packs op(B), a pass of w (288 or 768 x 384 floats), and only the rows of
  // d logits it claims, into one [n x c] output, where the chunks of oc had each thread pack all n
  // rows of its chunk into a partial of its own, then added (per-thread working set 3.1 MB of
  // packed d logits + 2.4 MB of output at L15M's 2048 rows, against 1.5 + 1.2 MB). The same bits
  // for any thread count either way; the row blocks measured up to 13% faster (docs/KERNELS.md).
  if (dinp && use_amx(bf16_operands, n, c, oc))
    amx_gemm(pool, false, false, n, c, oc, dout, oc, w, c, true, dinp, c);
  else if (dinp && split_k(c, oc) && use_pooled())
    gemm_pooled_rows(pool, false, false, n, c, oc, dout, oc, w, c, true, dinp, c);
  else if (dinp && split_k(c, oc))
    dinp_split_k(pool, dinp, dout, w, n, c, oc);
  else if (dinp && split_rows(pool, n, c < 4 * oc) && use_pooled())
    gemm_pooled_rows(pool, false, false, n, c, oc, dout, oc, w, c, true, dinp, c);
  else if (dinp && split_rows(pool, n, c < 4 * oc))
    gemm_shares(pool, n, c * oc, [&](int64_t i0, int64_t i1) {
      gemm_on_thread(false, false, i1 - i0, c, oc, dout + i0 * oc, oc, w, c, true, dinp + i0 * c,
                     c);
    });
  else if (dinp && use_pooled())
    gemm_pooled(pool, false, false, n, c, oc, dout, oc, w, c, true, dinp, c);
  else if (dinp)
    gemm_shares(pool, c, n * oc, [&](int64_t c0, int64_t c1) {
      gemm_on_thread(false, false, n, c1 - c0, oc, dout, oc, w + c0, c, true, dinp + c0, c);
    });
  // dw[oc, c] += dout^T[oc, n] inp[n, c], in shares of dw's rows (AMX: of its columns); dbias
  // summed by our GEMM as it packs dout^T, or by bias_backward.
  const bool amx_dw = dw && use_amx(bf16_operands, oc, c, n);
  const bool ours = dw && !amx_dw && cpu::gemm_f32_active();
  const bool fused_bias = ours && dbias;
  if (dbias && !fused_bias) bias_backward(dbias, dout, n, oc, pool);
  if (amx_dw)
    amx_gemm(pool, true, false, oc, c, n, dout, oc, inp, c, true, dw, c);
  else if (ours && !dbias && oc >= kSplitKRatio * c && use_pooled())
    gemm_pooled(pool, true, false, c, oc, n, inp, c, dout, oc, true, dw, c, true);
  else if (ours && !dbias && oc >= kSplitKRatio * c)
    // The output head's: as dw^T [c, oc] += inp^T dout, stored transposed straight into dw. Its
    // op(B), dout, is packed by plain copies of row pieces where dout^T needs a gather of 12
    // floats from every row (2-9% faster; docs/KERNELS.md). The same bits: each element sums the
    // same products in the same order.
    gemm_shares(pool, oc, n * c, [&](int64_t o0, int64_t o1) {
      cpu::gemm_f32(true, false, c, o1 - o0, n, inp, c, dout + o0, oc, true, dw + o0 * c, c,
                    nullptr, true);
    });
  else if (ours && use_pooled())  // blocks of dw's rows
    gemm_pooled_rows(pool, true, false, oc, c, n, dout, oc, inp, c, true, dw, c,
                     fused_bias ? dbias : nullptr);
  else if (dw)
    gemm_shares(pool, oc, n * c, [&](int64_t o0, int64_t o1) {
      for (int64_t r0 = o0; r0 < o1; r0 += kDwRows)
        gemm_on_thread(true, false, std::min(kDwRows, o1 - r0), c, n, dout + r0, oc, inp, c, true,
                       dw + r0 * c, c, fused_bias ? dbias + r0 : nullptr);
    });
}

void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t n, int64_t c,
                     float eps, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.rmsnorm", 8 * n * c, 4 * n * c);
  nexus::rms_norm(RmsNormArgs{x, w, eps, out, rstd, n, c}, pool);
}

void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                      const float* rstd, int64_t n, int64_t c, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.rmsnorm_bwd", 16 * n * c, 10 * n * c);
  nexus::rms_norm_backward(RmsNormBackwardArgs{dx, dw, dout, x, w, rstd, n, c}, pool);
}

void rope_rotate(float* x, int64_t n, int64_t t, int64_t n_heads, int64_t head_dim,
                 int64_t rope_dim, RopeStyle style, const float* cs, bool inverse,
                 ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.rope", 8 * n * n_heads * rope_dim, 3 * n * n_heads * rope_dim);
  nexus::rope(RopeArgs{x, n, n_heads, head_dim, rope_dim, style, cs, t, inverse}, pool);
}

namespace {

// How attention runs, per head (forward) or per (sequence, KV head) group (backward):
// - kTiled: register tiles (attention_tiles.h), with AVX2 and a head size that is a multiple of 8,
//   on 16 lanes where AVX-512 is active and the head size a multiple of 16 (the same bits). At
//   GPT-2's and L15M's shapes 25-33% faster than the OpenBLAS GEMMs with OpenBLAS's AVX-512
//   kernels, 18-24% with its AVX2 ones (BM_TrainAttention*, docs/TRAINING.md);
// - kBlas: OpenBLAS GEMMs in causal row blocks (train_attention_blas.cc; one OpenBLAS thread per
//   item, the items over the pool's threads), for kBlasAttnMinT tokens and more otherwise;
// - kLoops: the per-pair register kernels (AVX2, or scalar).
// NEXUS_TRAIN_ATTN=blas or =loops picks one of the last two whatever the shape.
constexpr int64_t kBlasAttnMinT = 32;
enum class AttnPath { kTiled, kBlas, kLoops };
AttnPath attention_path(const AttnShape& s) {
  if (s.window > 0) return AttnPath::kLoops;  // only the per-pair kernels take a window
  static const std::string forced = [] {
    const char* e = std::getenv("NEXUS_TRAIN_ATTN");
    return std::string(e ? e : "");
  }();
  if (forced == "loops") return AttnPath::kLoops;
  if (forced == "blas") return AttnPath::kBlas;
  if (use_avx2() && s.head_dim % 8 == 0) return AttnPath::kTiled;
  return s.t >= kBlasAttnMinT ? AttnPath::kBlas : AttnPath::kLoops;
}

// The transposed keys or values of the calling thread's tiled item, kept between calls.
float* tiled_scratch(const AttnShape& s) {
  thread_local std::vector<float> buf;
  const auto need = static_cast<size_t>(kern::attn_tiled_scratch(s.t, s.head_dim));
  if (buf.size() < need) buf.resize(need);
  return buf.data();
}

// Holds OpenBLAS at one thread for its lifetime (TrainModel already does; other callers may not).
class OneBlasThread {
 public:
  explicit OneBlasThread(bool on) : saved_(on ? openblas_get_num_threads() : 0) {
    if (on) openblas_set_num_threads(1);
  }
  ~OneBlasThread() {
    if (saved_ > 0) openblas_set_num_threads(saved_);
  }
  OneBlasThread(const OneBlasThread&) = delete;
  OneBlasThread& operator=(const OneBlasThread&) = delete;

 private:
  int saved_;
};

}  // namespace

void attention_forward(float* out, float* att, const float* q, const float* k, const float* v,
                       const AttnShape& s, ThreadPool* pool) {
  NEXUS_TRAIN_OP(
      "train.attention",
      4 * s.b * s.t * (s.n_heads + 2 * s.n_kv_heads) * s.head_dim + 4 * s.b * s.n_heads * s.t * s.t,
      2 * s.b * s.n_heads * s.t * s.t * s.head_dim);
  const AttnPath path = attention_path(s);
  const bool wide = cpu::avx512_active() && s.head_dim % 16 == 0;
  const bool simd = use_avx2() && kern::attn_avx2_supports(s.head_dim);
  const OneBlasThread one(path == AttnPath::kBlas);
  for_items(pool, s.b * s.n_heads, [&](int64_t item, int) {
    const int64_t b = item / s.n_heads, h = item % s.n_heads;
    if (path == AttnPath::kTiled)
      (wide ? kern::attn_forward_head_tiled_avx512 : kern::attn_forward_head_tiled_avx2)(
          out, att, q, k, v, s, b, h, tiled_scratch(s));
    else if (path == AttnPath::kBlas)
      kern::attn_forward_head_blas(out, att, q, k, v, s, b, h);
    else if (simd)
      kern::attn_forward_head_avx2(out, att, q, k, v, s, b, h);
    else
      kern::attn_forward_head_scalar(out, att, q, k, v, s, b, h);
  });
}

int64_t attention_backward_scratch(int64_t t) { return t * t + t; }

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* att,
                        const float* q, const float* k, const float* v, const AttnShape& s,
                        float* scratch, ThreadPool* pool) {
  NEXUS_TRAIN_OP(
      "train.attention_bwd",
      8 * s.b * s.t * (s.n_heads + 2 * s.n_kv_heads) * s.head_dim + 4 * s.b * s.n_heads * s.t * s.t,
      4 * s.b * s.n_heads * s.t * s.t * s.head_dim);
  const AttnPath path = attention_path(s);
  const bool wide = cpu::avx512_active() && s.head_dim % 16 == 0;
  const bool simd = use_avx2() && kern::attn_avx2_supports(s.head_dim);
  const OneBlasThread one(path == AttnPath::kBlas);
  if (path != AttnPath::kTiled) {  // the other kernels add into the gradients
    const int64_t n = s.b * s.t, qw = s.n_heads * s.head_dim, kvw = s.n_kv_heads * s.head_dim;
    for_ranges(pool, n, 16, [&](int64_t r0, int64_t r1) {
      std::fill(dq + r0 * qw, dq + r1 * qw, 0.0f);
      std::fill(dk + r0 * kvw, dk + r1 * kvw, 0.0f);
      std::fill(dv + r0 * kvw, dv + r1 * kvw, 0.0f);
    });
  }
  for_items(pool, s.b * s.n_kv_heads, [&](int64_t item, int thread) {
    const int64_t b = item / s.n_kv_heads, kh = item % s.n_kv_heads;
    float* dp = scratch + thread * attention_backward_scratch(s.t);
    if (path == AttnPath::kTiled)
      (wide ? kern::attn_backward_group_tiled_avx512 : kern::attn_backward_group_tiled_avx2)(
          dq, dk, dv, dout, att, q, k, v, s, b, kh, dp, tiled_scratch(s));
    else if (path == AttnPath::kBlas)
      kern::attn_backward_group_blas(dq, dk, dv, dout, att, q, k, v, s, b, kh, dp);
    else if (simd)
      kern::attn_backward_group_avx2(dq, dk, dv, dout, att, q, k, v, s, b, kh, dp);
    else
      kern::attn_backward_group_scalar(dq, dk, dv, dout, att, q, k, v, s, b, kh, dp);
  });
}

void swiglu_forward(float* out, const float* g, const float* u, int64_t n, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.swiglu", 12 * n, 0);
  nexus::swiglu(SwigluArgs{out, g, u, n}, pool);
}

void swiglu_backward(float* dg, float* du, const float* dout, const float* g, const float* u,
                     int64_t n, ThreadPool* pool) {
  NEXUS_TRAIN_OP("train.swiglu_bwd", 28 * n, 0);
  nexus::swiglu_backward(SwigluBackwardArgs{dg, du, dout, g, u, n}, pool);
}

void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t vocab,
                       int64_t n, int64_t c) {
  nexus::embedding(EmbeddingArgs{table, DType::kF32, vocab, c, tokens, n, out});
}

void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t n,
                        int64_t c) {
  NEXUS_TRAIN_OP("train.embedding_bwd", 8 * n * c, 0);
  nexus::embedding_backward(EmbeddingBackwardArgs{dtable, dout, tokens, n, c});
}

double cross_entropy_fused(float* logits, float* row_loss, const int32_t* targets, int64_t n,
                           int64_t v, float scale, ThreadPool* pool, Precision round) {
  NEXUS_TRAIN_OP("train.cross_entropy", 8 * n * v, 0);
  const auto fn = cpu::avx512_active() ? kern::ce_row_avx512
                  : use_avx2()         ? kern::ce_row_avx2
                                       : kern::ce_row_scalar;
  // round_to's kernel itself, row by row (round_to would record a profiler span for each row).
  const auto round_row = round == Precision::kF32 ? nullptr
                         : use_avx2()             ? kern::round_avx2
                                                  : kern::round_scalar;
  for_ranges(pool, n, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      float* row = logits + i * v;
      if (round_row) round_row(round, row, row, v);
      row_loss[i] = fn(row, v, targets[i], scale);
      if (round_row) round_row(round, row, row, v);
    }
  });
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += row_loss[i];
  return total;
}

}  // namespace nexus::train
