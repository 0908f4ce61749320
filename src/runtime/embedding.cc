// embed_tokens (embedding.h): hidden states summed in double, so the mean does not depend on the
// batch split.
#include "nexus/runtime/embedding.h"

#include <algorithm>
#include <cmath>

#include "nexus/model.h"

namespace nexus {

Result<std::vector<float>> embed_tokens(Context& ctx, int seq, std::span<const int32_t> tokens,
                                        int64_t max_batch) {
  if (tokens.empty()) return Status::error("the input is empty");
  const int64_t dim = ctx.model().config().dim, n = static_cast<int64_t>(tokens.size());
  std::vector<double> sum(static_cast<size_t>(dim), 0.0);
  std::vector<float> hidden;
  Batch batch;
  ctx.clear_seq(seq);
  Status st = Status::ok();
  for (int64_t i = 0; i < n && st; i += max_batch) {
    batch.clear();
    const int64_t end = std::min(n, i + max_batch);
    for (int64_t j = i; j < end; ++j) batch.add(tokens[j], static_cast<int32_t>(j), seq, true);
    st = ctx.decode(batch, &hidden, Context::Output::kHidden);
    if (!st) break;
    for (int64_t r = 0; r < end - i; ++r)
      for (int64_t d = 0; d < dim; ++d) sum[d] += hidden[r * dim + d];
  }
  ctx.clear_seq(seq);
  if (!st) return st;
  double norm = 0.0;
  for (double& v : sum) {
    v /= static_cast<double>(n);
    norm += v * v;
  }
  norm = std::sqrt(norm);
  std::vector<float> out(static_cast<size_t>(dim));
  for (int64_t d = 0; d < dim; ++d) out[d] = static_cast<float>(norm > 0 ? sum[d] / norm : 0.0);
  return out;
}

}  // namespace nexus
