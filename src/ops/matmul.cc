// matmul front-end: checks shapes and dtypes, converts the activations once to the weight type's
// dot-product type, then splits the weight rows over the thread pool (backends/cpu/gemm).
#include "ops/matmul.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "backends/cpu/gemm.h"
#include "backends/cpu/gemm_amx.h"
#include "backends/cpu/gemm_blas.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/repack.h"
#include "nexus/status.h"
#include "ops/matmul_w8a8.h"

namespace nexus {
namespace {

// Fewest weight rows per thread for the BLAS (prefill) path.
constexpr int64_t kMinRowsPerThread = 4;
// Multiply-adds below which a matmul runs on the calling thread: waking a worker and meeting at
// the barrier costs about as much as ~50k multiply-adds (measured on stories260K's 64x64 layers).
constexpr int64_t kMinParallelWork = 64 * 1024;

// The activation type of a weight dtype; Q4_0x8 and Q4_Kx8 are Q4_0 and Q4_K reordered
// (backends/cpu/repack.h).
// W8A8 weights take int8 activations of their own (ops/matmul_w8a8.h); Q8_0's block size is theirs.
DType dot_type(DType w) {
  return w == DType::kW8A8 ? DType::kQ8_0 : cpu::vec_dot_type(cpu::base_type(w));
}
bool computable(DType w) { return w == DType::kW8A8 || cpu::is_repacked(w) || cpu::has_kernels(w); }

void check_args(const Tensor& w, const float* x, int64_t n_tokens, const float* y) {
  NEXUS_CHECK(w.rank() == 2, "[matmul] weight must be 2-D {rows, k}, got " + w.shape_str());
  NEXUS_CHECK(!w.empty(), "[matmul] weight " + w.shape_str() + " has no data");
  NEXUS_CHECK(computable(w.dtype()),
              "[matmul] unsupported weight dtype " + std::string(dtype_name(w.dtype())));
  NEXUS_CHECK(n_tokens >= 0, "[matmul] negative token count " + std::to_string(n_tokens));
  NEXUS_CHECK(
      n_tokens == 0 || (x != nullptr && y != nullptr),
      "[matmul] null activation or output pointer for " + std::to_string(n_tokens) + " tokens");
  const DType dot = dot_type(w.dtype());
  const int64_t k = w.dim(1);
  NEXUS_CHECK(k % traits(dot).block_size == 0,
              "[matmul] k mismatch: weight " + w.shape_str() + " has k=" + std::to_string(k) +
                  ", not a multiple of the " + std::string(dtype_name(dot)) + " block size " +
                  std::to_string(traits(dot).block_size));
}

// F32/F16/BF16 weights take f32 activations as they are; block types get one conversion into
// the scratch arena. Returns the activation rows for the kernels and their stride.
const uint8_t* convert_activations(DType dot, const float* x, int64_t n_tokens, int64_t k,
                                   ThreadPool& pool, Arena& scratch, size_t* stride) {
  *stride = static_cast<size_t>(k) * sizeof(float);
  if (dot == DType::kF32) return reinterpret_cast<const uint8_t*>(x);
  const size_t x_stride = row_bytes(dot, k);
  *stride = x_stride;
  auto* buf = static_cast<uint8_t*>(scratch.alloc(x_stride * static_cast<size_t>(n_tokens)));
  const cpu::QuantizeFn quantize = cpu::kernels(dot).quantize;
  auto convert = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) quantize(x + t * k, buf + t * x_stride, k);
  };
  if (n_tokens > 1)
    pool.parallel_for(n_tokens, convert);
  else
    convert(0, n_tokens);
  return buf;
}

// Rows of the smallest piece of work a thread takes: one group of a repacked layout, or eight rows
// of any other type (a whole multi-row kernel pass).
constexpr int64_t kUnitRows = cpu::kRepackRows;
constexpr int kMaxGroup = 4;

// Rows [r0, r1) of one problem; for a repacked layout, r0 is a multiple of kUnitRows.
void run_rows(const cpu::GemmProblem& p, int64_t r0, int64_t r1) {
  if (cpu::is_repacked(p.w_type))
    cpu::gemm_rows_repacked(p, p.y_stride, r0, r1);
  else
    cpu::gemm_rows(p, r0, r1);
}

// Weight bytes a thread claims at a time on its share, per token (ThreadPool::steal_for): each
// thread walks one unbroken stream (chunks claimed in turn restarted it each time) and only a
// matmul's end is rebalanced. Per token: a batch re-reads its activations for every piece
// (measured: docs/KERNELS.md).
constexpr int64_t kStealBytes = 32 * 1024;

int64_t units_of(const Tensor& w) { return (w.dim(0) + kUnitRows - 1) / kUnitRows; }
size_t weight_bytes(const Tensor& w) { return w.row_stride() * static_cast<size_t>(w.dim(0)); }
// Whether matmul_group shares its units over the pool's threads (else it runs them on the caller).
bool splits(int64_t units, int64_t work, const ThreadPool& pool) {
  return units >= 2 && pool.size() > 1 && work >= kMinParallelWork;
}

// Whether the weights all have one type that prefill multiplies on our GEMM.
bool same_type_on_our_gemm(const MatmulOut* outs, int count) {
  const DType t = outs[0].w->dtype();
  for (int i = 1; i < count; ++i)
    if (outs[i].w->dtype() != t) return false;
  return cpu::prefill_on_our_gemm(t);
}

// Such a group over the pool: share s of every weight's rows (cut at multiples of 16, the tile's
// width) goes to one gemm_rows_group call, so each thread packs the tokens once a pass for all the
// weights instead of once per weight. Prefill's Q/K/V and gate/up.
void gemm_group_on_pool(const MatmulOut* outs, int count, const float* x, int64_t n_tokens,
                        int64_t k, ThreadPool& pool) {
  const uint8_t* w[kMaxGroup];
  size_t w_stride[kMaxGroup];
  float* y[kMaxGroup];
  int64_t rows[kMaxGroup];
  for (int i = 0; i < count; ++i) {
    w[i] = outs[i].w->row(0);
    w_stride[i] = outs[i].w->row_stride();
    y[i] = outs[i].y;
    rows[i] = outs[i].w->dim(0);
  }
  const DType t = outs[0].w->dtype();
  pool.run([&](int s, int shares) {
    int64_t r0[kMaxGroup], r1[kMaxGroup];
    auto cut = [&](int64_t n, int at) { return std::min(n, (n * at / shares + 15) / 16 * 16); };
    for (int i = 0; i < count; ++i) {
      r0[i] = cut(rows[i], s);
      r1[i] = cut(rows[i], s + 1);
    }
    cpu::gemm_rows_group(t, count, w, w_stride, k, x, n_tokens, y, rows, r0, r1);
  });
}

// BF16 weights on AMX: the activations packed once for every weight of the group (threads share
// the packing by token blocks), then each thread takes a share of every weight's rows.
bool on_amx(const Tensor& w, int64_t n_tokens) {
  return w.dtype() == DType::kBF16 && n_tokens >= cpu::kBlasMinTokens &&
         cpu::bf16w_amx_usable(w.dim(1));
}

void gemm_bf16_amx_on_pool(const MatmulOut* outs, int count, const float* x, int64_t n_tokens,
                           int64_t k, ThreadPool& pool, Arena& scratch) {
  const size_t mark = scratch.used();
  auto* xp = static_cast<uint16_t*>(
      scratch.alloc(cpu::bf16_act_size(n_tokens, k) * sizeof(uint16_t)));
  const int64_t blocks = (n_tokens + 31) / 32 * 2;
  pool.parallel_for(blocks, [&](int64_t b0, int64_t b1) {
    cpu::pack_bf16_act(x, k, n_tokens, k, b0, b1, xp);
  });
  pool.run([&](int s, int shares) {
    for (int i = 0; i < count; ++i) {
      const int64_t rows = outs[i].w->dim(0);
      // Shares of whole 32-row blocks (the tiles' height).
      auto cut = [&](int at) { return std::min(rows, (rows * at / shares + 31) / 32 * 32); };
      cpu::gemm_bf16w_amx_rows(reinterpret_cast<const uint16_t*>(outs[i].w->row(0)),
                               static_cast<int64_t>(outs[i].w->row_stride() / sizeof(uint16_t)),
                               cut(s), cut(s + 1), k, xp, n_tokens, outs[i].y, rows);
    }
  });
  scratch.rewind(mark);
}

std::atomic<MatmulObserver*> g_observer{nullptr};

void notify(const Tensor& w, const float* x, int64_t n_tokens) {
  if (MatmulObserver* o = g_observer.load(std::memory_order_acquire); o != nullptr && n_tokens > 0)
    o->observe(w, x, n_tokens);
}

void matmul_unobserved(const Tensor& w, const float* x, int64_t n_tokens, float* y,
                       ThreadPool& pool, Arena& scratch);
void matmul_group_unobserved(const MatmulOut* outs, int count, const float* x, int64_t n_tokens,
                             ThreadPool& pool, Arena& scratch);

}  // namespace

void set_matmul_observer(MatmulObserver* observer) {
  g_observer.store(observer, std::memory_order_release);
}

bool matmul_on_blas(DType w, int64_t n_tokens) {
  return n_tokens >= cpu::kBlasMinTokens && !cpu::is_repacked(w) && w != DType::kW8A8;
}

size_t matmul_scratch_bytes(const Tensor& w, int64_t n_tokens) {
  if (on_amx(w, n_tokens)) return cpu::bf16_act_size(n_tokens, w.dim(1)) * sizeof(uint16_t) + 64;
  if (w.dtype() == DType::kW8A8) return matmul_w8a8_scratch_bytes(w.dim(1), n_tokens);
  const DType dot = dot_type(w.dtype());
  if (dot == DType::kF32) return 0;
  return row_bytes(dot, w.dim(1)) * static_cast<size_t>(n_tokens);
}

void matmul(const Tensor& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            Arena& scratch) {
  check_args(w, x, n_tokens, y);
  notify(w, x, n_tokens);
  matmul_unobserved(w, x, n_tokens, y, pool, scratch);
}

namespace {

void matmul_unobserved(const Tensor& w, const float* x, int64_t n_tokens, float* y,
                       ThreadPool& pool, Arena& scratch) {
  if (n_tokens == 0 || w.dim(0) == 0) return;
  const int64_t rows = w.dim(0);
  const int64_t k = w.dim(1);

  if (on_amx(w, n_tokens)) {
    const MatmulOut out{&w, y};
    gemm_bf16_amx_on_pool(&out, 1, x, n_tokens, k, pool, scratch);
    return;
  }
  // Many tokens, no integer kernel: expand weights to f32 panels and use a packed sgemm.
  if (matmul_on_blas(w.dtype(), n_tokens)) {
    pool.parallel_for(
        rows,
        [&](int64_t r0, int64_t r1) {
          cpu::gemm_rows_blas(w.dtype(), w.row(0), w.row_stride(), rows, k, x, n_tokens, y, rows,
                              r0, r1);
        },
        // One chunk per thread: each sgemm call re-packs all the tokens' activations, so fewer,
        // larger calls pay that once per thread (L15M pp512 with 4 chunks per thread: 10% slower).
        std::max<int64_t>(kMinRowsPerThread, rows / pool.size()));
    return;
  }

  // A few tokens (decode): a group of one.
  const MatmulOut out{&w, y};
  matmul_group_unobserved(&out, 1, x, n_tokens, pool, scratch);
}

}  // namespace

size_t matmul_group_scratch_bytes(const MatmulOut* outs, int count, int64_t n_tokens) {
  size_t total = 0;
  for (int i = 0; i < count; ++i) total += matmul_scratch_bytes(*outs[i].w, n_tokens) + 64;
  return total;
}

void matmul_group(const MatmulOut* outs, int count, const float* x, int64_t n_tokens,
                  ThreadPool& pool, Arena& scratch) {
  for (int i = 0; i < count && i < kMaxGroup; ++i) notify(*outs[i].w, x, n_tokens);
  matmul_group_unobserved(outs, count, x, n_tokens, pool, scratch);
}

namespace {

void matmul_group_unobserved(const MatmulOut* outs, int count, const float* x, int64_t n_tokens,
                             ThreadPool& pool, Arena& scratch) {
  NEXUS_CHECK(count >= 1 && count <= kMaxGroup, "[matmul] a group holds 1 to " +
                                                    std::to_string(kMaxGroup) + " weights, got " +
                                                    std::to_string(count));
  const int64_t k = outs[0].w->dim(1);
  for (int i = 0; i < count; ++i) {
    check_args(*outs[i].w, x, n_tokens, outs[i].y);
    NEXUS_CHECK(outs[i].w->dim(1) == k,
                "[matmul] group weights differ in k: " + outs[0].w->shape_str() + " and " +
                    outs[i].w->shape_str());
  }
  if (n_tokens == 0) return;
  // W8A8 weights go together on the int8 GEMM. Weights bound for a packed GEMM go one by one, or
  // as one group on our GEMM when they share its type (x packed once for them); the rest stay a
  // group of dot kernels.
  MatmulOut dot_outs[kMaxGroup], gemm_outs[kMaxGroup], w8a8_outs[kMaxGroup];
  int n_dot = 0, n_gemm = 0, n_w8a8 = 0;
  for (int i = 0; i < count; ++i)
    if (outs[i].w->dtype() == DType::kW8A8)
      w8a8_outs[n_w8a8++] = outs[i];
    else
      (matmul_on_blas(outs[i].w->dtype(), n_tokens) ? gemm_outs[n_gemm++] : dot_outs[n_dot++]) =
          outs[i];
  if (n_w8a8 > 0) {
    const size_t mark = scratch.used();
    matmul_w8a8(w8a8_outs, n_w8a8, x, n_tokens, pool, scratch);
    scratch.rewind(mark);
  }
  if (n_gemm >= 2 && same_type_on_our_gemm(gemm_outs, n_gemm) && on_amx(*gemm_outs[0].w, n_tokens))
    gemm_bf16_amx_on_pool(gemm_outs, n_gemm, x, n_tokens, k, pool, scratch);
  else if (n_gemm >= 2 && same_type_on_our_gemm(gemm_outs, n_gemm))
    gemm_group_on_pool(gemm_outs, n_gemm, x, n_tokens, k, pool);
  else
    for (int i = 0; i < n_gemm; ++i) {
      const size_t mark = scratch.used();
      matmul_unobserved(*gemm_outs[i].w, x, n_tokens, gemm_outs[i].y, pool, scratch);
      scratch.rewind(mark);
    }
  if (n_dot == 0) return;
  outs = dot_outs;
  count = n_dot;
  // One problem per weight; activations converted once per distinct dot type.
  cpu::GemmProblem probs[kMaxGroup];
  DType dots[kMaxGroup];
  int64_t first_unit[kMaxGroup + 1] = {0};
  int64_t work = 0;
  for (int i = 0; i < count; ++i) {
    const Tensor& w = *outs[i].w;
    const DType dot = dots[i] = dot_type(w.dtype());
    size_t x_stride = 0;
    const uint8_t* xq = nullptr;
    for (int j = 0; j < i && xq == nullptr; ++j)
      if (dots[j] == dot) xq = probs[j].x, x_stride = probs[j].x_stride;
    if (xq == nullptr) xq = convert_activations(dot, x, n_tokens, k, pool, scratch, &x_stride);
    probs[i] = {w.dtype(), w.row(0), w.row_stride(), k,       xq,
                x_stride,  n_tokens, outs[i].y,      w.dim(0)};
    first_unit[i + 1] = first_unit[i] + units_of(w);
    work += w.dim(0) * k * n_tokens;
  }
  // Units of eight rows numbered across the weights; a chunk of units may span two weights.
  auto run_units = [&](int64_t u0, int64_t u1) {
    for (int i = 0; i < count && u0 < u1; ++i) {
      if (u0 >= first_unit[i + 1]) continue;
      const int64_t e = std::min(u1, first_unit[i + 1]);
      const int64_t rows = probs[i].y_stride;
      run_rows(probs[i], (u0 - first_unit[i]) * kUnitRows,
               std::min(rows, (e - first_unit[i]) * kUnitRows));
      u0 = e;
    }
  };
  const int64_t units = first_unit[count];
  if (!splits(units, work, pool)) {
    run_units(0, units);
    return;
  }
  size_t bytes = 0;
  for (int i = 0; i < count; ++i) bytes += weight_bytes(*outs[i].w);
  const auto unit_bytes = static_cast<int64_t>(bytes / static_cast<size_t>(units));
  // Pieces grow with the tokens (each kernel call re-reads their activations), but a share keeps
  // at least four of them so its end can still be rebalanced.
  const int64_t most = std::max<int64_t>(1, units / (4 * pool.size()));
  const int64_t step =
      std::clamp<int64_t>(kStealBytes * n_tokens / std::max<int64_t>(1, unit_bytes), 1, most);
  pool.steal_for(units, step, run_units);
}

}  // namespace

MatmulShareStart matmul_group_share_start(const Tensor* const* w, int count, int n_threads,
                                          int thread) {
  int64_t units = 0;
  for (int i = 0; i < count; ++i) units += units_of(*w[i]);
  // ThreadPool::steal_for's shares: thread i starts on unit n * i / n_threads.
  int64_t u = units * thread / std::max(1, n_threads);
  for (int i = 0; i < count; ++i) {
    if (u < units_of(*w[i])) return {i, static_cast<size_t>(u * kUnitRows) * w[i]->row_stride()};
    u -= units_of(*w[i]);
  }
  return {count, 0};
}

void matmul_group_prefetch(const Tensor* const* w, int count, int64_t n_tokens, ThreadPool& pool,
                           size_t bytes) {
  int64_t units = 0, work = 0;
  for (int i = 0; i < count; ++i) {
    if (matmul_on_blas(w[i]->dtype(), n_tokens) || w[i]->dtype() == DType::kW8A8) return;
    units += units_of(*w[i]);
    work += w[i]->dim(0) * w[i]->dim(1) * n_tokens;
  }
  if (!splits(units, work, pool)) return;
  for (int t = 1; t < pool.size(); ++t) {
    const MatmulShareStart s = matmul_group_share_start(w, count, pool.size(), t);
    if (s.weight >= count) continue;
    // The rest of the share's weight at most (the share may run on into the next weight, but
    // `bytes` is a few hundred KiB against weights of megabytes).
    const Tensor& t_w = *w[s.weight];
    pool.prefetch_while_idle(t, static_cast<const uint8_t*>(t_w.row(0)) + s.offset,
                             std::min(bytes, weight_bytes(t_w) - s.offset));
  }
}

}  // namespace nexus
