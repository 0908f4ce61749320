// TEMPORARY (lead): replaced by the quant branch.
#pragma once
#include <span>
#include "core/allocator.h"
#include "core/thread_pool.h"
#include "nexus/tensor.h"
namespace nexus {
void matmul(const Tensor& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, Arena& scratch);
void embed_rows(const Tensor& table, std::span<const int32_t> ids, float* out);
}
