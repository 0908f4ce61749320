// run_calibration (calibration.h).
#include "compress/calibration.h"

#include <algorithm>
#include <vector>

#include "nexus/context.h"

namespace nexus {
namespace {

// Installs an observer for its lifetime (also when decode fails part-way).
struct ObserverScope {
  explicit ObserverScope(MatmulObserver* o) { set_matmul_observer(o); }
  ~ObserverScope() { set_matmul_observer(nullptr); }
};

}  // namespace

Result<int64_t> run_calibration(const Model& model, const Tokenizer& tok, std::string_view text,
                                int64_t n_ctx, int64_t max_chunks, int n_threads,
                                MatmulObserver& observer, const std::string& who,
                                const std::function<void(int64_t, int64_t)>& progress) {
  if (n_ctx < 2)
    return Status::error(who + ": the chunk size must be >= 2, got " + std::to_string(n_ctx));
  const std::vector<int32_t> tokens = tok.encode(text, false);
  const auto n_tok = static_cast<int64_t>(tokens.size());
  int64_t total = n_tok / n_ctx;
  if (max_chunks >= 0) total = std::min(total, max_chunks);
  if (total < 1)
    return Status::error(who + ": the text is " + std::to_string(n_tok) +
                         " tokens, fewer than one chunk of " + std::to_string(n_ctx) +
                         " (use a longer text or smaller chunks)");
  ContextOptions co;
  co.n_ctx = n_ctx;
  co.n_threads = n_threads;
  co.max_batch = n_ctx;
  auto ctx = Context::create(model, co);
  if (!ctx) return ctx.status();
  ObserverScope scope(&observer);
  Batch b;
  std::vector<float> logits;
  for (int64_t c = 0; c < total; ++c) {
    b.clear();
    for (int64_t i = 0; i < n_ctx; ++i) {
      int32_t t = tokens[static_cast<size_t>(c * n_ctx + i)];
      if (i == 0 && tok.bos_id() >= 0) t = tok.bos_id();
      b.add(t, static_cast<int32_t>(i), 0, i + 1 == n_ctx);
    }
    (*ctx)->clear_seq(0);
    NEXUS_RETURN_IF_ERROR((*ctx)->decode(b, &logits));
    if (progress) progress(c + 1, total);
  }
  return total;
}

}  // namespace nexus
