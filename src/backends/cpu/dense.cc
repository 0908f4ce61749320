// The dense f32 layer on the CPU (backends/api/dense.h): our f32 GEMM (gemm_f32.h; AMX tiles for
// bf16 operands where the CPU has them), or OpenBLAS without AVX2, one single-threaded call per
// pool thread, with the bias and residual folded into the GEMM's starting values; and a scalar
// reference for the op test.
#include "backends/cpu/dense.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/gemm_amx.h"
#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/train_kernels.h"
#include "nexus/core/thread_pool.h"
#include "nexus/status.h"

namespace nexus::cpu {

using par::for_ranges;

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

// Our GEMM on the pool's dynamic blocks (gemm_f32_pool, gemm_f32_pool_rows): where it is
// active and NEXUS_STATIC_GEMM_SHARES is not 1 (the static shares below, one per thread: the same
// bits; for measuring one against the other).
bool use_pooled() {
  static const bool on = gemm_f32_active() && !env_is_one("NEXUS_STATIC_GEMM_SHARES");
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
  return bf16_operands && amx_bf16_active() &&
         2 * m * n * k >= kAmxFlopsPerElement * (m + n) * k;
}

// C[m x n] (+)= op(A) op(B) on AMX tiles (gemm_bf16_amx_rows): op(A) is converted to bf16
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
        gemm_bf16_amx(trans_a, trans_b, r1 - r0, n, k, trans_a ? a + r0 : a + r0 * lda, lda, b,
                           ldb, accumulate, c + r0 * ldc, ldc);
    });
    return;
  }
  // The calling thread's buffer: the lambdas below run on the workers too, and a thread_local
  // named inside them would be each worker's own.
  thread_local std::vector<uint16_t> buffer;
  buffer.resize(bf16_rows_size(m, k));
  uint16_t* rows = buffer.data();
  const int64_t blocks = (m + 15) / 16;  // conversion units of 16 rows
  const int64_t padded = (m + 31) / 32 * 32;
  auto convert = [&](int64_t b0, int64_t b1) {
    convert_bf16_rows(trans_a, m, k, a, lda, 16 * b0, std::min(padded, 16 * b1), rows);
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
      gemm_bf16_amx_rows(rows, m, k, trans_b, j1 - j0, trans_b ? b + j0 * ldb : b + j0, ldb,
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
  const bool ours = gemm_f32_active();
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
        gemm_f32(false, false, n, c, k1 - k0, dout + k0, oc, w + k0 * c, c, j == 0,
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
            add_vectors_avx2(dinp + i * c, dinp + i * c, pj + i * c, c);
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
  if (gemm_f32_active())
    return gemm_f32(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, row_sums);
  NEXUS_CHECK(row_sums == nullptr, "[train] row sums need our f32 GEMM");
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb),
              accumulate ? 1.0f : 0.0f, c, static_cast<int>(ldc));
}

// Our GEMM (only where gemm_f32_active()) over the whole pool with dynamically claimed blocks
// (gemm_f32_pool); inline on this thread when the pool is absent or a thread's share would be
// under kMinShareMacs multiply-adds, as gemm_shares decides. trans_c as in gemm_f32.
void gemm_pooled(ThreadPool* pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 const float* a, int64_t lda, const float* b, int64_t ldb, bool accumulate,
                 float* c, int64_t ldc, bool trans_c = false) {
  if (!worth_sharing(pool, n, m * k))
    return gemm_f32(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, nullptr,
                         trans_c);
  gemm_f32_pool(pool, trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc,
                     trans_c);
}

// The same in blocks of C's rows (gemm_f32_pool_rows): for the splits by rows (tokens, or a d
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
    return gemm_f32(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc, row_sums);
  if (n * std::min(k, kWholeBPassK) * static_cast<int64_t>(sizeof(float)) > kMaxWholeB) {
    // Static row shares: every thread packs op(B) block by block for all its rows.
    return gemm_shares(pool, m, n * k, [&](int64_t i0, int64_t i1) {
      gemm_f32(trans_a, trans_b, i1 - i0, n, k, trans_a ? a + i0 : a + i0 * lda, lda, b, ldb,
                    accumulate, c + i0 * ldc, ldc, row_sums ? row_sums + i0 : nullptr);
    });
  }
  gemm_f32_pool_rows(pool, trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc,
                          row_sums);
}

// Columns [o0, o1) of every row of out [n, oc] = add [n, oc] + bias [oc] (either may be null).
// Vectorised: GCC -O2 leaves such loops scalar (~1 value a cycle, as the old bias pass ran).
void fill_output(float* out, const float* add, const float* bias, int64_t n, int64_t oc, int64_t o0,
                 int64_t o1) {
  const auto add_vectors = avx2_active() ? add_vectors_avx2 : add_vectors_scalar;
  const size_t bytes = static_cast<size_t>(o1 - o0) * sizeof(float);
  for (int64_t i = 0; i < n; ++i) {
    float* o = out + i * oc + o0;
    if (add && bias)
      add_vectors(o, add + i * oc + o0, bias + o0, o1 - o0);
    else
      std::memcpy(o, add ? add + i * oc + o0 : bias + o0, bytes);
  }
}

// The bias gradient split over columns: each column still sums its rows in order.
void bias_backward(float* db, const float* dout, int64_t n, int64_t c, ThreadPool* pool) {
  const auto fn = avx2_active() ? bias_backward_avx2 : bias_backward_scalar;
  for_ranges(pool, c, 64, [&](int64_t j0, int64_t j1) { fn(db, dout, n, c, j0, j1); });
}

void dense_forward(const DenseArgs& a, ThreadPool* pool) {
  float* out = a.out;
  const float *inp = a.inp, *w = a.w, *add_rows = a.add_rows, *bias = a.bias;
  const int64_t n = a.n, c = a.c, oc = a.oc;
  const bool bf16_operands = a.bf16_operands;
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

void dense_backward(const DenseBackwardArgs& a, ThreadPool* pool) {
  float *dinp = a.dinp, *dw = a.dw, *dbias = a.dbias;
  const float *dout = a.dout, *inp = a.inp, *w = a.w;
  const int64_t n = a.n, c = a.c, oc = a.oc;
  const bool bf16_operands = a.bf16_operands;
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
  const bool ours = dw && !amx_dw && gemm_f32_active();
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
      gemm_f32(true, false, c, o1 - o0, n, inp, c, dout + o0, oc, true, dw + o0 * c, c,
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

// The reference: every output element one f32 sum over the inner index, in order.
void dense_forward_scalar(const DenseArgs& a, ThreadPool* pool) {
  for_ranges(pool, a.n, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t o = 0; o < a.oc; ++o) {
        float s = (a.add_rows ? a.add_rows[i * a.oc + o] : 0.0f) + (a.bias ? a.bias[o] : 0.0f);
        for (int64_t k = 0; k < a.c; ++k) s += a.inp[i * a.c + k] * a.w[o * a.c + k];
        a.out[i * a.oc + o] = s;
      }
  });
}

void dense_backward_scalar(const DenseBackwardArgs& a, ThreadPool* pool) {
  if (a.dinp)
    for_ranges(pool, a.n, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t k = 0; k < a.c; ++k) {
          float s = 0.0f;
          for (int64_t o = 0; o < a.oc; ++o) s += a.dout[i * a.oc + o] * a.w[o * a.c + k];
          a.dinp[i * a.c + k] += s;
        }
    });
  for_ranges(pool, a.oc, 1, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      if (a.dbias)
        for (int64_t i = 0; i < a.n; ++i) a.dbias[o] += a.dout[i * a.oc + o];
      if (a.dw)
        for (int64_t k = 0; k < a.c; ++k) {
          float s = 0.0f;
          for (int64_t i = 0; i < a.n; ++i) s += a.dout[i * a.oc + o] * a.inp[i * a.c + k];
          a.dw[o * a.c + k] += s;
        }
    }
  });
}

const KernelVariant<DenseArgs> kDense[] = {{"gemm", always_available, dense_forward},
                                           {"scalar", always_available, dense_forward_scalar}};
const KernelVariant<DenseBackwardArgs> kDenseBackward[] = {
    {"gemm", always_available, dense_backward},
    {"scalar", always_available, dense_backward_scalar}};

}  // namespace

KernelVariants<DenseArgs> dense_kernels() { return kDense; }
KernelVariants<DenseBackwardArgs> dense_backward_kernels() { return kDenseBackward; }

}  // namespace nexus::cpu
