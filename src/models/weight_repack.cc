// repack_weights: which tensors are repacked at load (see weight_repack.h) and the copying.
#include "models/weight_repack.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "backends/cpu/gemm_w8a8.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/sparse24.h"
#include "nexus/core/allocator.h"

namespace nexus {
namespace {

constexpr size_t kHugePage = 2u << 20;
// Bytes of source copied (or repacked) between two releases of its pages.
constexpr size_t kCopyChunk = 4u << 20;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// Bytes of t stored as type `to` (its own, or its 2:4 form).
size_t stored_bytes(const Tensor& t, DType to) {
  return to == t.dtype() ? t.nbytes() : row_bytes(to, t.dim(1)) * static_cast<size_t>(t.dim(0));
}

// The decision. Q4_0, Q5_0, Q8_0, Q4_K and Q6_K matrices of at least one group of rows are repacked
// to Q4_0x8, Q5_0x8, Q8_0x8, Q4_Kx8 and Q6_Kx8. In a model loaded from a file mapping every other
// matrix (and the norms' and biases' vectors) is copied as it is into the same huge pages: the file
// mapping's 4 KiB pages cost a TLB miss per page walked (decode 5-60% faster from the copy;
// docs/KERNELS.md). The token table alone (untied) is read a few rows per token and stays a view
// of the file. Null: not repacked.
const cpu::RepackedLayout* repack_layout(const Tensor& t) {
  if (t.empty() || t.rank() != 2 || t.dim(0) < cpu::kRepackRows) return nullptr;
  return cpu::layout_of_base(t.dtype());
}

// The 2:4 type a layer projection is compressed to at load (sparse24.h), or its own type: F32,
// F16 and BF16 matrices whose rows fill 32-column blocks and whose every group of four columns
// holds at most two nonzeros (nexus prune --2:4 writes them; a dense matrix fails on its first
// group). NEXUS_SPARSE24=0 keeps them dense, for side-by-side measurements.
DType sparse_target(const Tensor& t) {
  const char* env = std::getenv("NEXUS_SPARSE24");
  const bool on = env == nullptr || std::strcmp(env, "0") != 0;
  DType to;
  if (!on || t.empty() || t.rank() != 2 || t.dim(1) % cpu::kSparse24Block != 0 ||
      !cpu::sparse24_of(t.dtype(), &to))
    return t.dtype();
  return cpu::rows_are_2of4(t.dtype(), static_cast<const uint8_t*>(t.data()), t.row_stride(),
                            t.dim(0), t.dim(1))
             ? to
             : t.dtype();
}

// n bytes at file offset off into dst; false on any error or a short file.
bool read_at(int fd, uint8_t* dst, size_t n, size_t off) {
  while (n > 0) {
    const ssize_t got = pread(fd, dst, n, static_cast<off_t>(off));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    dst += got, off += static_cast<size_t>(got), n -= static_cast<size_t>(got);
  }
  return true;
}

// Drops every page that holds a byte of [p, p + n) of a read-only file mapping (a neighbour still
// read through the mapping, an untied token table, finds its page in the file again). Pages
// wholly inside only, as before, left the page under each chunk's end mapped (the check against
// the mapping touches it) and every page of a small vector.
size_t release_pages(const void* p, size_t n) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = begin / page * page;
  const uintptr_t last = round_up(begin + n, page);
  if (last <= first) return 0;
  if (madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;
  return last - first;
}

}  // namespace

bool repack_enabled() {
  const char* v = std::getenv("NEXUS_REPACK");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

RepackStats repack_weights(ModelWeights& w, const MappedSource* source, const W8A8Plan* w8a8) {
  const bool release_source = source != nullptr;
  // The activation scale of a matrix that takes the W8A8 layout; null for any other.
  auto w8a8_scale = [&](const Tensor& t) -> const float* {
    if (w8a8 == nullptr || t.empty() || t.rank() != 2 || t.dtype() != DType::kQ8_0 ||
        !cpu::w8a8_fits(t.dim(0), t.dim(1)))
      return nullptr;
    auto it = w8a8->act_scale.find(t.data());
    return it == w8a8->act_scale.end() ? nullptr : &it->second;
  };
  RepackStats st;
  if (!repack_enabled()) return st;
  // Every tensor of the model but a GPT-2 position table (looked up, like an untied token table).
  // From a file mapping the norms' and biases' vectors are copied too: read every token, each
  // would keep its page of the mapping resident (a whole 2 MiB page where the page cache holds the
  // file in huge pages: Q06B Q8_0 kept 88 MiB of the file mapped that way).
  std::vector<Tensor*> slots = {&w.tok_embd, &w.output, &w.out_norm, &w.out_norm_b};
  for (LayerWeights& l : w.layers)
    for (Tensor* t : {&l.attn_norm, &l.attn_norm_b, &l.wq, &l.wk, &l.wv, &l.wo, &l.wqkv, &l.bqkv,
                      &l.bq, &l.bk, &l.bv, &l.bo, &l.q_norm, &l.k_norm, &l.ffn_norm, &l.ffn_norm_b,
                      &l.w_gate, &l.w_up, &l.w_down, &l.b_up, &l.b_down, &l.ssm_in, &l.ssm_conv1d,
                      &l.ssm_conv1d_b, &l.ssm_x, &l.ssm_dt, &l.ssm_dt_b, &l.ssm_a, &l.ssm_d,
                      &l.ssm_norm, &l.ssm_out})
      slots.push_back(t);
  // The layer projections, which alone may be compressed to 2:4 (every other consumer of a
  // matrix, such as a token lookup, reads dense rows).
  std::map<const void*, DType> sparse;
  for (LayerWeights& l : w.layers)
    for (Tensor* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.wqkv, &l.w_gate, &l.w_up, &l.w_down, &l.ssm_in,
                      &l.ssm_out})
      if (const DType to = sparse_target(*t); to != t->dtype()) sparse[t->data()] = to;
  const auto stored_type = [&](const Tensor& t) {
    const auto it = sparse.find(t.data());
    return it != sparse.end() ? it->second : t.dtype();
  };
  // Distinct sources (a tied output shares the token table's data), in slot order.
  std::map<const void*, size_t> offset_of;
  std::vector<Tensor*> order;
  size_t total = 0;
  for (Tensor* t : slots) {
    if (t == &w.tok_embd && w.tok_embd.data() != w.output.data()) continue;  // lookups only
    const bool copy = release_source && !t->empty();
    const bool changed = repack_layout(*t) != nullptr || w8a8_scale(*t) != nullptr ||
                         sparse.count(t->data()) != 0;
    if (!(changed || copy) || offset_of.count(t->data())) continue;
    offset_of[t->data()] = total;
    order.push_back(t);
    total += round_up(stored_bytes(*t, stored_type(*t)), kAlignment);
  }
  if (total == 0) return st;
  std::shared_ptr<void> mem = aligned_shared(total + kHugePage, MemCategory::kWeights);
  auto* base =
      reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(mem.get()), kHugePage));
  // Fewer page faults while copying and fewer TLB misses while decoding; advice only.
  madvise(base, round_up(total, kHugePage), MADV_HUGEPAGE);
  // Copy on a few threads (a thread per contiguous share of the bytes): the copy is bound by
  // page faults and memory, and load time counts towards the first token.
  const int n_threads =
      static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1u, 4u));
  std::vector<RepackStats> part(n_threads);
  std::vector<std::vector<uint8_t>> bounce(n_threads);
  // Read the file itself when it can be opened (else the mapping is read).
  const int fd = source != nullptr ? open(source->path.c_str(), O_RDONLY | O_CLOEXEC) : -1;
  auto work = [&](int id) {
    for (Tensor* t : order) {
      const size_t off = offset_of.at(t->data());
      if (static_cast<int>(off * n_threads / total) != id) continue;
      // In chunks of whole row groups, each chunk's source pages dropped right after it is
      // copied: the peak resident memory stays the model's size, not the model plus the largest
      // tensor (L15M F32 with its 37 MB head: 103 MiB whole-tensor, the file's 61 MB chunked).
      const cpu::RepackedLayout* layout = repack_layout(*t);
      const DType to = stored_type(*t);
      const bool compress = to != t->dtype();
      const float* act_scale = w8a8_scale(*t);
      const bool transform = layout != nullptr || compress || act_scale != nullptr;
      const int64_t rows = t->rank() >= 2 ? t->dim(0) : 1, k = transform ? t->dim(1) : 0;
      const size_t rb = t->nbytes() / static_cast<size_t>(rows);
      const size_t drb = stored_bytes(*t, to) / static_cast<size_t>(rows);
      // Whole groups of sixteen rows (W8A8's; two of the x8 layouts' groups).
      const int64_t chunk = std::max<int64_t>(
          cpu::kW8A8Rows, static_cast<int64_t>(kCopyChunk / rb) / cpu::kW8A8Rows * cpu::kW8A8Rows);
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = std::min(chunk, rows - r0);
        const size_t bytes = static_cast<size_t>(n) * rb;
        const auto* src = static_cast<const uint8_t*>(t->data()) + r0 * rb;
        uint8_t* dst = base + off + r0 * drb;
        // From the file: straight into the copy, or into a bounce buffer to be repacked.
        const uint8_t* from = src;
        if (fd >= 0) {
          uint8_t* into = dst;
          if (transform) {
            if (bounce[id].size() < bytes) bounce[id].resize(bytes);
            into = bounce[id].data();
          }
          // The ends of the chunk must match the mapping: a file replaced on disk since it was
          // mapped is not read (the mapping is, two page faults a chunk for the check).
          const size_t edge = std::min<size_t>(64, bytes);
          if (read_at(fd, into, bytes, static_cast<size_t>(src - source->base)) &&
              std::memcmp(into, src, edge) == 0 &&
              std::memcmp(into + bytes - edge, src + bytes - edge, edge) == 0)
            from = into;
        }
        if (compress)
          cpu::compress_2of4(t->dtype(), from, rb, n, k, dst);
        else if (act_scale != nullptr)
          cpu::repack_w8a8(from, dst, n, k, *act_scale);
        else if (layout != nullptr)
          layout->repack(from, dst, n, k);
        else if (from != dst)
          std::memcpy(dst, from, bytes);
        if (release_source) part[id].released += release_pages(src, bytes);
      }
      part[id].tensors += 1;
      part[id].sparse24 += compress ? 1 : 0;
      part[id].bytes += t->nbytes();
    }
  };
  std::vector<std::thread> threads;
  for (int id = 1; id < n_threads; ++id) threads.emplace_back(work, id);
  work(0);
  for (std::thread& th : threads) th.join();
  if (fd >= 0) close(fd);
  // Once more over every source, now that nothing reads the mapping: a fault (the chunk checks
  // above) maps the cached pages around it too, so pages released earlier can be mapped again.
  if (release_source)
    for (Tensor* t : order) release_pages(t->data(), t->nbytes());
  for (const RepackStats& p : part) {
    st.tensors += p.tensors;
    st.sparse24 += p.sparse24;
    st.bytes += p.bytes;
    st.released += p.released;
  }
  std::map<const void*, Tensor> done;
  for (Tensor* t : order) {
    const cpu::RepackedLayout* layout = repack_layout(*t);
    const DType stored = stored_type(*t);
    const DType to = stored != t->dtype()        ? stored
                     : w8a8_scale(*t) != nullptr ? DType::kW8A8
                     : layout != nullptr         ? layout->packed
                                                 : t->dtype();
    done[t->data()] = Tensor(to, t->shape(), base + offset_of.at(t->data()), mem);
  }
  for (Tensor* t : slots)
    if (auto it = done.find(t->data()); it != done.end()) *t = it->second;
  return st;
}

}  // namespace nexus
