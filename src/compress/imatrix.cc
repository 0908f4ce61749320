// Importance matrices: collected through the matmul observer while a Context runs the
// calibration chunks, stored as llama.cpp stores them.
#include "nexus/compress/imatrix.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "compress/calibration.h"
#include "nexus/context.h"
#include "nexus/io/gguf.h"
#include "ops/matmul.h"

namespace nexus {
namespace {

// Sums x^2 per column for every named weight the forward pass multiplies.
class Collector : public MatmulObserver {
 public:
  Collector(const Model& m, bool include_output) : model_(m), include_output_(include_output) {}

  void observe(const Tensor& w, const float* x, int64_t n_tokens) override {
    auto it = by_data_.find(w.data());
    if (it == by_data_.end()) {
      std::string name = model_.tensor_name(w);
      // The head (the embedding when tied) only on request, as llama-imatrix does.
      const bool head = &w == &model_.weights().output || name == "output.weight" ||
                        name == "token_embd.weight";
      Acc* acc = nullptr;
      if (!name.empty() && (include_output_ || !head)) {
        Acc& a = acc_[name];
        a.sum2.assign(static_cast<size_t>(w.dim(1)), 0.0);
        acc = &a;
      }
      it = by_data_.emplace(w.data(), acc).first;
    }
    Acc* a = it->second;
    if (a == nullptr) return;
    const auto k = static_cast<int64_t>(a->sum2.size());
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t c = 0; c < k; ++c) {
        const double v = x[t * k + c];
        a->sum2[static_cast<size_t>(c)] += v * v;
      }
    a->count += n_tokens;
  }

  void fill(Imatrix* m) const {
    for (const auto& [name, a] : acc_) {
      ImatrixEntry e;
      e.sum2.assign(a.sum2.begin(), a.sum2.end());
      e.count = a.count;
      m->entries[name] = std::move(e);
    }
  }

 private:
  struct Acc {
    std::vector<double> sum2;
    int64_t count = 0;
  };
  const Model& model_;
  bool include_output_;
  std::map<std::string, Acc> acc_;
  std::unordered_map<const void*, Acc*> by_data_;
};

// Clears the process-wide observer however collection ends.

}  // namespace

std::vector<float> Imatrix::importance(const std::string& name) const {
  auto it = entries.find(name);
  if (it == entries.end() || it->second.count <= 0) return {};
  std::vector<float> v(it->second.sum2.size());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = it->second.sum2[i] / static_cast<float>(it->second.count);
  return v;
}

Result<Imatrix> collect_imatrix(const Model& model, const Tokenizer& tok, std::string_view text,
                                const ImatrixOptions& o,
                                const std::function<void(int64_t, int64_t)>& progress) {
  Collector collector(model, o.include_output);
  auto total = run_calibration(model, tok, text, o.n_ctx, o.chunks, o.n_threads, collector,
                               "imatrix", progress);
  if (!total) return total.status();
  Imatrix m;
  collector.fill(&m);
  if (m.entries.empty()) return Status::error("imatrix: no weight matrix of the model was seen");
  if (!o.dataset.empty()) m.datasets.push_back(o.dataset);
  m.chunk_count = *total;
  m.chunk_size = o.n_ctx;
  return m;
}

Status write_imatrix(const Imatrix& m, const std::string& path) {
  GgufWriter w;
  w.set_string("general.type", "imatrix");
  w.set_string_array("imatrix.datasets", m.datasets);
  w.set_u32("imatrix.chunk_count", static_cast<uint32_t>(m.chunk_count));
  w.set_u32("imatrix.chunk_size", static_cast<uint32_t>(m.chunk_size));
  for (const auto& [name, e] : m.entries) {  // std::map: sorted, as llama-imatrix writes them
    const float count = static_cast<float>(e.count);
    w.add_tensor(name + ".in_sum2", DType::kF32, {1, static_cast<int64_t>(e.sum2.size())},
                 e.sum2.data());
    w.add_tensor(name + ".counts", DType::kF32, {1, 1}, &count);
  }
  return w.write(path);
}

Result<Imatrix> read_imatrix(const std::string& path) {
  auto f = GgufFile::open(path);
  if (!f) return f.status();
  const GgufFile& g = *f;
  const std::optional<std::string> type = g.get_string("general.type");
  if (type != "imatrix")
    return Status::error(path + ": not an imatrix file (general.type is " +
                         (type ? "'" + *type + "'" : std::string("absent")) + ")");
  Imatrix m;
  if (const auto* d = g.get_string_array("imatrix.datasets")) m.datasets = *d;
  m.chunk_count = g.get_int("imatrix.chunk_count").value_or(0);
  m.chunk_size = g.get_int("imatrix.chunk_size").value_or(0);
  constexpr std::string_view kSum = ".in_sum2";
  for (const GgufTensorInfo& t : g.tensors()) {
    if (t.name.size() <= kSum.size() || !t.name.ends_with(kSum)) continue;
    const std::string name = t.name.substr(0, t.name.size() - kSum.size());
    const GgufTensorInfo* c = g.find_tensor(name + ".counts");
    if (c == nullptr) return Status::error(path + ": " + t.name + " has no " + name + ".counts");
    if (t.dtype != DType::kF32 || c->dtype != DType::kF32)
      return Status::error(path + ": " + name + "'s tensors are not F32");
    int64_t n = 1, n_mat = 1;
    for (int64_t d : t.shape) n *= d;
    for (int64_t d : c->shape) n_mat *= d;
    if (n_mat != 1)
      return Status::error(path + ": " + name + " has " + std::to_string(n_mat) +
                           " matrices (expert weights are not supported)");
    ImatrixEntry e;
    e.sum2.resize(static_cast<size_t>(n));
    std::memcpy(e.sum2.data(), t.data, static_cast<size_t>(n) * sizeof(float));
    float count = 0.0f;
    std::memcpy(&count, c->data, sizeof(float));
    if (!(count >= 0.0f))
      return Status::error(path + ": " + name + ".counts is " + std::to_string(count));
    e.count = static_cast<int64_t>(count);
    m.entries[name] = std::move(e);
  }
  if (m.entries.empty()) return Status::error(path + ": the imatrix holds no entries");
  return m;
}

}  // namespace nexus
