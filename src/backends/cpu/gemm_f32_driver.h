// The loop nest both f32 GEMM kernels share (gemm_f32.h): passes of k, op(A) packed once a pass,
// op(B) packed in blocks that stay in L2, and the register tile over every pair of panels.
// Included only by gemm_f32_avx2.cc and gemm_f32_avx512.cc, each instantiating it with functions
// of its own anonymous namespace, so no instantiation is shared between files compiled for
// different ISAs (docs/KERNELS.md: an AVX-512 file instantiates nothing another file does).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <new>

#include "backends/cpu/gemm_f32.h"

namespace nexus::cpu {

// The ISA's parts: the register tile (Mr x Nr), k per pass (Kc), the op(B) block buffer in floats
// (BFloats); PackA(trans_a, a, lda, m, p0, kc, kp, dst, sums), PackB(trans_b, b, ldb, j0, nc, p0,
// kc, kp, dst) and the tile with C plain and transposed, TilePlain / TileTrans(kp, a_panel,
// b_panel, c, ldc, accumulate, mr, nr), as either file defines them. BElem: the element type
// of b as PackB reads it (f32, or the f16/bf16 bits of prefill's weights and of the F16 KV cache,
// converted as packed). Each instantiation keeps its own per-thread buffers.
template <int Mr, int Nr, int64_t Kc, int64_t BFloats, auto PackA, auto PackB, auto TilePlain,
          auto TileTrans, typename BElem = float>
struct GemmF32Driver {
  struct K {
    static constexpr int kMr = Mr, kNr = Nr;
    static constexpr int64_t kKc = Kc, kBFloats = BFloats;
  };
  // A per-thread buffer that grows to the largest size asked, kept for the thread's life.
  struct Buffer {
    float* p = nullptr;
    int64_t floats = 0;
    ~Buffer() { std::free(p); }
    float* at_least(int64_t n) {
      if (n > floats) {
        std::free(p);
        p = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(n) * sizeof(float)));
        if (p == nullptr) throw std::bad_alloc();
        floats = n;
      }
      return p;
    }
  };

  static int64_t lesser(int64_t x, int64_t y) { return x < y ? x : y; }

  // The thread's packing buffers (op(A)'s panels, op(B)'s block), shared by run and part.
  static Buffer& a_buffer() {
    thread_local Buffer b;
    return b;
  }
  static Buffer& b_buffer() {
    thread_local Buffer b;
    return b;
  }
  static Buffer& b_whole_buffer() {  // part_rows: all of op(B) for a pass
    thread_local Buffer b;
    return b;
  }

  // Every row panel of op(A), in turn, against every column panel of a packed block of op(B).
  // With C transposed the loops swap, so one column panel's rows of C^T are finished before the
  // next (L15M's head d weight 7% faster on AVX-512).
  static void tiles(const float* pa, const float* pb, int64_t m, int64_t nc, int64_t kp, bool acc,
                    float* c, int64_t ldc, bool trans_c) {
    if (trans_c) {
      for (int64_t j = 0; j < nc; j += K::kNr)
        for (int64_t i = 0; i < m; i += K::kMr)
          TileTrans(kp, pa + i * kp, pb + j * kp, c + j * ldc + i, ldc, acc,
                    static_cast<int>(lesser(K::kMr, m - i)),
                    static_cast<int>(lesser(K::kNr, nc - j)));
      return;
    }
    for (int64_t i = 0; i < m; i += K::kMr)
      for (int64_t j = 0; j < nc; j += K::kNr)
        TilePlain(kp, pa + i * kp, pb + j * kp, c + i * ldc + j, ldc, acc,
                  static_cast<int>(lesser(K::kMr, m - i)),
                  static_cast<int>(lesser(K::kNr, nc - j)));
  }

  static void run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                  int64_t lda, const BElem* b, int64_t ldb, bool accumulate, float* c, int64_t ldc,
                  float* row_sums, bool trans_c) {
    float* pa = a_buffer().at_least((m + K::kMr - 1) / K::kMr * K::kMr *
                                    ((lesser(k, K::kKc) + 7) / 8 * 8));
    float* pb = b_buffer().at_least(K::kBFloats);
    for (int64_t p0 = 0; p0 < k; p0 += K::kKc) {
      const int64_t kc = lesser(K::kKc, k - p0), kp = (kc + 7) / 8 * 8;
      PackA(trans_a, a, lda, m, p0, kc, kp, pa, trans_a ? row_sums : nullptr);
      // Blocks of op(B) as wide as the buffer holds at this pass's k (AVX-512: 256 columns at
      // 768, 672 at L15M's 288, where the wider blocks ran its head's forward 3.5% faster).
      const int64_t width = K::kBFloats / kp / K::kNr * K::kNr;
      for (int64_t j0 = 0; j0 < n; j0 += width) {
        const int64_t nc = lesser(width, n - j0);
        PackB(trans_b, b, ldb, j0, nc, p0, kc, kp, pb);
        tiles(pa, pb, m, nc, kp, accumulate || p0 > 0, trans_c ? c + j0 * ldc : c + j0, ldc,
              trans_c);
      }
    }
  }

  // Several products C_i[m x n_i] = A B_i^T on one A (trans_a false; each B_i an [n_i x k] matrix
  // of rows, ldb_i apart), op(A) packed once a pass for all of them (prefill's Q/K/V and gate/up
  // weights): for each i the bits of run(false, true, m, n_i, k, ...).
  static void run_group(int count, int64_t m, int64_t k, const float* a, int64_t lda,
                        const BElem* const* b, const int64_t* ldb, const int64_t* n,
                        float* const* c, const int64_t* ldc) {
    float* pa =
        a_buffer().at_least((m + K::kMr - 1) / K::kMr * K::kMr * ((lesser(k, K::kKc) + 7) / 8 * 8));
    float* pb = b_buffer().at_least(K::kBFloats);
    for (int64_t p0 = 0; p0 < k; p0 += K::kKc) {
      const int64_t kc = lesser(K::kKc, k - p0), kp = (kc + 7) / 8 * 8;
      PackA(false, a, lda, m, p0, kc, kp, pa, nullptr);
      const int64_t width = K::kBFloats / kp / K::kNr * K::kNr;
      for (int i = 0; i < count; ++i)
        for (int64_t j0 = 0; j0 < n[i]; j0 += width) {
          const int64_t nc = lesser(width, n[i] - j0);
          PackB(true, b[i], ldb[i], j0, nc, p0, kc, kp, pb);
          tiles(pa, pb, m, nc, kp, p0 > 0, c[i] + j0, ldc[i], false);
        }
    }
  }

  // The cooperative form (gemm_f32_pool): the units of work are (pass, block of op(B)'s columns)
  // pairs, claimed in that order from coop->next by every thread that calls part. A block's pass
  // waits until the block's previous pass is stored (coop->done), so each element of C still sums
  // its passes in order; a thread packs op(A) again only when its claims reach a new pass. The
  // earliest unfinished claim never waits (its block's previous pass was claimed before it, so it
  // is finished), so the claims always progress; one thread alone runs them all in order.
  // Block widths and the split over threads change no bits (each element is summed as in run).
  struct Unit {
    int64_t pass, block, p0, kc, kp;
  };
  // The next unclaimed unit of k's passes, or false when none is left.
  static bool claim(GemmCoop* coop, int64_t k, Unit* u) {
    const int64_t i = __atomic_fetch_add(&coop->next, 1, __ATOMIC_RELAXED);
    if (i >= coop->passes * coop->blocks) return false;
    u->pass = i / coop->blocks;
    u->block = i % coop->blocks;
    u->p0 = u->pass * K::kKc;
    u->kc = lesser(K::kKc, k - u->p0);
    u->kp = (u->kc + 7) / 8 * 8;
    return true;
  }
  // Until the unit's block has its previous passes stored.
  static void wait_turn(const GemmCoop* coop, const Unit& u) {
    while (__atomic_load_n(&coop->done[u.block], __ATOMIC_ACQUIRE) < u.pass)
      __builtin_ia32_pause();
  }
  static void finish(GemmCoop* coop, const Unit& u) {
    __atomic_store_n(&coop->done[u.block], u.pass + 1, __ATOMIC_RELEASE);
  }

  static void plan(int64_t n, int64_t k, int threads, GemmCoop* coop) {
    const int64_t kp = (lesser(k, K::kKc) + 7) / 8 * 8;
    // As wide as the buffer holds, but at least four blocks a thread where n allows.
    const int64_t want = (n + 4 * threads - 1) / (4 * threads);
    const int64_t want_nr = (want + K::kNr - 1) / K::kNr * K::kNr;
    coop->width = lesser(K::kBFloats / kp / K::kNr * K::kNr, want_nr < K::kNr ? K::kNr : want_nr);
    coop->blocks = (n + coop->width - 1) / coop->width;
    coop->passes = (k + K::kKc - 1) / K::kKc;
  }

  static void part(GemmCoop* coop, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                   const float* a, int64_t lda, const BElem* b, int64_t ldb, bool accumulate,
                   float* c, int64_t ldc, bool trans_c) {
    float* pa = a_buffer().at_least((m + K::kMr - 1) / K::kMr * K::kMr *
                                    ((lesser(k, K::kKc) + 7) / 8 * 8));
    float* pb = b_buffer().at_least(K::kBFloats);
    int64_t packed_pass = -1;
    for (Unit u; claim(coop, k, &u);) {
      if (u.pass != packed_pass) {
        PackA(trans_a, a, lda, m, u.p0, u.kc, u.kp, pa, nullptr);
        packed_pass = u.pass;
      }
      wait_turn(coop, u);
      const int64_t j0 = u.block * coop->width, nc = lesser(coop->width, n - j0);
      PackB(trans_b, b, ldb, j0, nc, u.p0, u.kc, u.kp, pb);
      tiles(pa, pb, m, nc, u.kp, accumulate || u.p0 > 0, trans_c ? c + j0 * ldc : c + j0, ldc,
            trans_c);
      finish(coop, u);
    }
  }

  // The same with the units (pass, block of C's rows): for splits by rows, where op(B) is the
  // weight. A thread packs all of op(B) once a pass (as a row share did), into a buffer of its own,
  // and only the rows it claims of op(A); the tiles then walk op(B) in blocks of the buffer's
  // width, which stay in L2 across the rows of the unit. row_sums (trans_a) as in run: each row's
  // pass is summed by the one unit that packs it, passes in order.
  static void plan_rows(int64_t m, int64_t k, int threads, GemmCoop* coop) {
    const int64_t want = (m + 4 * threads - 1) / (4 * threads);
    int64_t height = (want + K::kMr - 1) / K::kMr * K::kMr;
    if (height < 8 * K::kMr) height = 8 * K::kMr;
    coop->width = height;  // rows a block
    coop->blocks = (m + height - 1) / height;
    coop->passes = (k + K::kKc - 1) / K::kKc;
  }

  static void part_rows(GemmCoop* coop, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                        const float* a, int64_t lda, const BElem* b, int64_t ldb, bool accumulate,
                        float* c, int64_t ldc, float* row_sums, bool trans_c) {
    const int64_t kp_max = (lesser(k, K::kKc) + 7) / 8 * 8, height = coop->width;
    float* pa = a_buffer().at_least(height * kp_max);
    float* pb = b_whole_buffer().at_least((n + K::kNr - 1) / K::kNr * K::kNr * kp_max);
    const int64_t width = K::kBFloats / kp_max / K::kNr * K::kNr;
    int64_t packed_pass = -1;
    for (Unit u; claim(coop, k, &u);) {
      if (u.pass != packed_pass) {
        PackB(trans_b, b, ldb, 0, n, u.p0, u.kc, u.kp, pb);
        packed_pass = u.pass;
      }
      const int64_t i0 = u.block * height, mr = lesser(height, m - i0);
      wait_turn(coop, u);
      PackA(trans_a, trans_a ? a + i0 : a + i0 * lda, lda, mr, u.p0, u.kc, u.kp, pa,
            trans_a && row_sums != nullptr ? row_sums + i0 : nullptr);
      for (int64_t j0 = 0; j0 < n; j0 += width)
        tiles(pa, pb + j0 * u.kp, mr, lesser(width, n - j0), u.kp, accumulate || u.p0 > 0,
              trans_c ? c + j0 * ldc + i0 : c + i0 * ldc + j0, ldc, trans_c);
      finish(coop, u);
    }
  }
};

// gemm_f32_group_avx2 / _avx512 (gemm_f32.h): the group's rows unpacked for run_group on the f32
// driver or on the half driver of the group's element type.
template <class F32, class F16, class BF16>
void run_group_rows(GemmBType type, int count, const GemmBRows* bs, int64_t m, int64_t k,
                    const float* a, int64_t lda) {
  const void* b[kMaxGemmGroup];
  int64_t ldb[kMaxGemmGroup], n[kMaxGemmGroup], ldc[kMaxGemmGroup];
  float* c[kMaxGemmGroup];
  for (int i = 0; i < count; ++i) {
    b[i] = bs[i].b;
    ldb[i] = bs[i].ldb;
    n[i] = bs[i].n;
    c[i] = bs[i].c;
    ldc[i] = bs[i].ldc;
  }
  const auto* halves = reinterpret_cast<const uint16_t* const*>(b);
  if (type == GemmBType::kF32)
    F32::run_group(count, m, k, a, lda, reinterpret_cast<const float* const*>(b), ldb, n, c, ldc);
  else if (type == GemmBType::kF16)
    F16::run_group(count, m, k, a, lda, halves, ldb, n, c, ldc);
  else
    BF16::run_group(count, m, k, a, lda, halves, ldb, n, c, ldc);
}

}  // namespace nexus::cpu
