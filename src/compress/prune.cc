// Structured and unstructured pruning of GGUF models (compress/prune.h): importances from an
// imatrix and the weights, then each tensor's rows or columns selected, or its smallest weights
// zeroed.
#include "nexus/compress/prune.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "nexus/compress/gguf_convert.h"

namespace nexus {
namespace {

// Weights that convert_row reads and writes: floats and block-quantized types.
bool is_weight(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || traits(t).quantized;
}

struct Dims {
  std::string arch;
  int64_t layers = 0, n_embd = 0, n_ff = 0, n_head = 0, n_kv = 0, head_dim = 0;
};

Result<Dims> dims_of(const GgufFile& f) {
  Dims d;
  auto arch = f.get_string("general.architecture");
  if (!arch) return Status::error("prune: the file has no general.architecture");
  d.arch = *arch;
  const std::string a = d.arch + ".";
  auto get = [&](const std::string& key) -> std::optional<int64_t> {
    if (auto v = f.get_int(a + key)) return v;
    // Per-layer arrays (hybrids): the first non-zero entry; mixed widths are refused below.
    if (const auto* arr = f.get_int_array(a + key))
      for (int64_t x : *arr)
        if (x != 0) return x;
    return std::nullopt;
  };
  d.layers = get("block_count").value_or(0);
  d.n_embd = get("embedding_length").value_or(0);
  d.n_ff = get("feed_forward_length").value_or(0);
  d.n_head = get("attention.head_count").value_or(0);
  d.n_kv = get("attention.head_count_kv").value_or(d.n_head);
  if (d.layers <= 0 || d.n_embd <= 0)
    return Status::error("prune: " + d.arch + " has no block_count / embedding_length");
  d.head_dim = get("attention.key_length").value_or(d.n_head > 0 ? d.n_embd / d.n_head : 0);
  return d;
}

std::string blk(int64_t layer, const std::string& name) {
  return "blk." + std::to_string(layer) + "." + name;
}

// The tensor's rows as f32 ([rows][cols]).
Result<std::vector<float>> rows_f32(const GgufTensorInfo& t) {
  const int64_t cols = t.shape.back();
  const size_t in_row = row_bytes(t.dtype, cols), rows = t.nbytes / in_row;
  std::vector<float> out(rows * static_cast<size_t>(cols)), scratch;
  for (size_t r = 0; r < rows; ++r) {
    Status s = convert_row(t.dtype, t.data + r * in_row, DType::kF32, out.data() + r * cols, cols,
                           scratch);
    if (!s) return Status::error("prune: tensor '" + t.name + "': " + s.message());
  }
  return out;
}

// Adds [rows][cols] f32 values as `type` (or the type whose block fits the rows).
Status add_rows(GgufWriter& w, const std::string& name, DType type, std::vector<int64_t> shape,
                const std::vector<float>& v) {
  const int64_t cols = shape.back();
  const DType to = is_weight(type) ? fallback_type(type, cols) : type;
  const size_t out_row = row_bytes(to, cols), rows = v.size() / static_cast<size_t>(cols);
  std::vector<uint8_t> out(out_row * rows);
  std::vector<float> scratch;
  for (size_t r = 0; r < rows; ++r) {
    Status s = convert_row(DType::kF32, v.data() + r * cols, to, out.data() + r * out_row, cols,
                           scratch);
    if (!s) return Status::error("prune: tensor '" + name + "': " + s.message());
  }
  w.add_tensor(name, to, std::move(shape), out.data());
  return Status::ok();
}

// The indices of the `keep` largest scores, in increasing order.
std::vector<int64_t> top(const std::vector<double>& score, int64_t keep) {
  std::vector<int64_t> idx(score.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int64_t x, int64_t y) { return score[x] > score[y]; });
  idx.resize(static_cast<size_t>(keep));
  std::sort(idx.begin(), idx.end());
  return idx;
}

Result<std::vector<double>> column_norms2(const GgufTensorInfo& t) {  // sum over rows of w^2
  auto v = rows_f32(t);
  if (!v) return v.status();
  const int64_t cols = t.shape.back(), rows = static_cast<int64_t>(v->size()) / cols;
  std::vector<double> n(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) n[c] += double((*v)[r * cols + c]) * (*v)[r * cols + c];
  return n;
}

Result<std::vector<double>> input_power(const Imatrix& m, const GgufTensorInfo& t) {
  std::vector<float> imp = m.importance(t.name);
  if (imp.empty()) return Status::error("prune: the imatrix has no entry for " + t.name);
  if (static_cast<int64_t>(imp.size()) != t.shape.back())
    return Status::error("prune: the imatrix entry of " + t.name + " has " +
                         std::to_string(imp.size()) + " columns, the tensor " +
                         std::to_string(t.shape.back()));
  return std::vector<double>(imp.begin(), imp.end());
}

// Per input column c of weight `name`: mean x_c^2 (the imatrix) times |W[:, c]|^2, the power that
// column adds to the matrix's output.
Result<std::vector<double>> output_power(const GgufFile& f, const Imatrix& m,
                                         const std::string& name) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (t == nullptr) return Status::error("prune: the model has no tensor " + name);
  auto norms = column_norms2(*t);
  if (!norms) return norms.status();
  auto power = input_power(m, *t);
  if (!power) return power.status();
  for (size_t c = 0; c < norms->size(); ++c) (*norms)[c] *= (*power)[c];
  return norms;
}

bool is_block_matrix(const GgufTensorInfo& t) {
  return t.name.rfind("blk.", 0) == 0 && t.shape.size() == 2 && t.name.ends_with(".weight") &&
         !keeps_f32(t) && is_weight(t.dtype);
}

// Zeroes the fraction `f` of each row's weights with the smallest |w| * sqrt(importance) (|w|
// without importances).
void zero_smallest(std::vector<float>& v, int64_t cols, const std::vector<float>& imp, double f) {
  const auto zero = static_cast<int64_t>(f * double(cols));
  const bool weighted = imp.size() == static_cast<size_t>(cols);
  std::vector<std::pair<float, int64_t>> sc(static_cast<size_t>(cols));
  for (size_t r = 0; r < v.size() / static_cast<size_t>(cols); ++r) {
    float* row = v.data() + r * cols;
    for (int64_t c = 0; c < cols; ++c)
      sc[c] = {std::fabs(row[c]) * (weighted ? std::sqrt(imp[c]) : 1.0f), c};
    std::nth_element(sc.begin(), sc.begin() + zero, sc.end());
    for (int64_t k = 0; k < zero; ++k) row[sc[k].second] = 0.0f;
  }
}

// Zeroes, in every group of four consecutive weights of each row, the two with the smallest
// |w| * sqrt(importance) (the later one on ties). Rows whose width is not a multiple of four are
// left as they are.
void zero_2of4(std::vector<float>& v, int64_t cols, const std::vector<float>& imp) {
  if (cols % 4 != 0) return;
  const bool weighted = imp.size() == static_cast<size_t>(cols);
  for (size_t g = 0; g < v.size(); g += 4) {
    const auto c = static_cast<int64_t>(g % static_cast<size_t>(cols));
    float s[4];
    for (int i = 0; i < 4; ++i)
      s[i] = std::fabs(v[g + i]) * (weighted ? std::sqrt(imp[c + i]) : 1.0f);
    // Keep the two largest scores (the first on ties).
    int a = 0;
    for (int i = 1; i < 4; ++i)
      if (s[i] > s[a]) a = i;
    int b = a == 0 ? 1 : 0;
    for (int i = 0; i < 4; ++i)
      if (i != a && s[i] > s[b]) b = i;
    for (int i = 0; i < 4; ++i)
      if (i != a && i != b) v[g + i] = 0.0f;
  }
}

}  // namespace

Result<std::vector<std::vector<double>>> ffn_channel_scores(const GgufFile& in, const Imatrix& m) {
  auto d = dims_of(in);
  if (!d) return d.status();
  std::vector<std::vector<double>> out;
  for (int64_t l = 0; l < d->layers; ++l) {
    auto s = output_power(in, m, blk(l, "ffn_down.weight"));
    if (!s) return s.status();
    for (double& x : *s) x = std::sqrt(x);
    out.push_back(std::move(s).value());
  }
  return out;
}

Result<std::vector<std::vector<double>>> kv_group_scores(const GgufFile& in, const Imatrix& m) {
  auto d = dims_of(in);
  if (!d) return d.status();
  if (in.get_int_array(d->arch + ".attention.head_count_kv") != nullptr)
    return Status::error("prune: " + d->arch +
                         " has per-layer head counts (a hybrid): heads cannot be pruned");
  if (d->n_head <= 0 || d->n_kv <= 0 || d->n_head % d->n_kv != 0)
    return Status::error("prune: " + d->arch + " has no attention heads to prune");
  std::vector<std::vector<double>> out;
  const int64_t per = d->n_head / d->n_kv;
  for (int64_t l = 0; l < d->layers; ++l) {
    if (in.find_tensor(blk(l, "attn_qkv.weight")) != nullptr)
      return Status::error("prune: " + blk(l, "attn_qkv.weight") +
                           " is a fused QKV projection: heads cannot be pruned (FFN channels can)");
    auto power = output_power(in, m, blk(l, "attn_output.weight"));
    if (!power) return power.status();
    std::vector<double> s(d->n_kv, 0.0);
    for (int64_t c = 0; c < static_cast<int64_t>(power->size()); ++c)
      s[c / d->head_dim / per] += (*power)[c];
    out.push_back(std::move(s));
  }
  return out;
}

Result<PrunePlan> plan_prune(const GgufFile& in, const PruneOptions& o) {
  auto d = dims_of(in);
  if (!d) return d.status();
  if (!(o.ffn_keep > 0.0 && o.ffn_keep <= 1.0))
    return Status::error("prune: the FFN fraction kept must be in (0, 1], got " +
                         std::to_string(o.ffn_keep));
  if (!(o.heads_keep > 0.0 && o.heads_keep <= 1.0))
    return Status::error("prune: the head fraction kept must be in (0, 1], got " +
                         std::to_string(o.heads_keep));
  if (!(o.unstructured >= 0.0 && o.unstructured < 1.0))
    return Status::error("prune: the unstructured sparsity must be in [0, 1), got " +
                         std::to_string(o.unstructured));
  if (o.two_of_four && o.unstructured > 0.0)
    return Status::error("prune: give 2:4 or an unstructured sparsity, not both");
  PrunePlan p;
  p.n_ff = p.n_ff_kept = d->n_ff;
  p.n_kv = p.n_kv_kept = d->n_kv;
  p.n_head = d->n_head;
  p.head_dim = d->head_dim;
  const bool ffn = o.ffn_keep < 1.0, heads = o.heads_keep < 1.0;
  if ((ffn || heads) && o.imatrix == nullptr)
    return Status::error("prune: structured pruning needs calibration activations (an imatrix)");
  if (ffn) {
    if (d->n_ff <= 0) return Status::error("prune: " + d->arch + " has no feed_forward_length");
    int64_t keep = static_cast<int64_t>(std::ceil(o.ffn_keep * double(d->n_ff)));
    if (d->n_ff >= 32) keep = std::min(d->n_ff, (keep + 31) / 32 * 32);
    p.n_ff_kept = keep;
    auto s = ffn_channel_scores(in, *o.imatrix);
    if (!s) return s.status();
    for (const auto& row : *s) {
      if (static_cast<int64_t>(row.size()) != d->n_ff)
        return Status::error("prune: a layer's FFN is " + std::to_string(row.size()) +
                             " wide, the metadata says " + std::to_string(d->n_ff));
      p.ffn.push_back(top(row, keep));
    }
  }
  if (heads) {
    if (d->n_head <= 0 || d->n_kv <= 0 || d->n_head % d->n_kv != 0)
      return Status::error("prune: " + d->arch + " has no attention heads to prune");
    const int64_t keep =
        std::max<int64_t>(1, static_cast<int64_t>(std::llround(o.heads_keep * double(d->n_kv))));
    p.n_kv_kept = keep;
    auto s = kv_group_scores(in, *o.imatrix);
    if (!s) return s.status();
    for (const auto& row : *s) p.groups.push_back(top(row, keep));
  }
  return p;
}

Result<GgufWriter> prune_gguf(const GgufFile& in, const PruneOptions& o,
                              const std::function<void(size_t, size_t, const std::string&)>&
                                  progress) {
  auto d = dims_of(in);
  if (!d) return d.status();
  auto plan = plan_prune(in, o);
  if (!plan) return plan.status();
  const PrunePlan& p = *plan;
  GgufWriter w;
  w.copy_metadata(in);
  const std::string a = d->arch + ".";
  if (!p.ffn.empty()) {
    if (in.get_int_array(a + "feed_forward_length") != nullptr)
      w.set_i32_array(a + "feed_forward_length",
                      std::vector<int64_t>(static_cast<size_t>(d->layers), p.n_ff_kept));
    else
      w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(p.n_ff_kept));
  }
  const int64_t per = p.n_head > 0 && p.n_kv > 0 ? p.n_head / p.n_kv : 1;
  if (!p.groups.empty()) {
    w.set_u32(a + "attention.head_count", static_cast<uint32_t>(p.n_kv_kept * per));
    w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(p.n_kv_kept));
    // The head size no longer follows from embedding_length / head_count.
    w.set_u32(a + "attention.key_length", static_cast<uint32_t>(p.head_dim));
    w.set_u32(a + "attention.value_length", static_cast<uint32_t>(p.head_dim));
  }
  const size_t n = in.tensors().size();
  for (size_t ti = 0; ti < n; ++ti) {
    const GgufTensorInfo& t = in.tensors()[ti];
    int64_t layer = -1;
    std::string part;
    if (t.name.rfind("blk.", 0) == 0) {
      const size_t dot = t.name.find('.', 4);
      layer = std::stoll(t.name.substr(4, dot - 4));
      part = t.name.substr(dot + 1);
    }
    // Which units of rows (or columns) stay: FFN channels, query heads or KV heads.
    std::vector<int64_t> units;
    int64_t unit = 1;
    bool by_cols = false;
    auto heads_of_groups = [&](bool query) {
      std::vector<int64_t> u;
      for (int64_t g : p.groups[layer])
        for (int64_t h = 0; h < (query ? per : 1); ++h) u.push_back(query ? g * per + h : g);
      return u;
    };
    const bool fp = !p.ffn.empty() && layer >= 0, hp = !p.groups.empty() && layer >= 0;
    if (fp && (part.rfind("ffn_gate.", 0) == 0 || part.rfind("ffn_up.", 0) == 0)) {
      units = p.ffn[layer];
    } else if (fp && part == "ffn_down.weight") {
      units = p.ffn[layer];
      by_cols = true;
    } else if (hp && part.rfind("attn_q.", 0) == 0) {
      units = heads_of_groups(true);
      unit = p.head_dim;
    } else if (hp && (part.rfind("attn_k.", 0) == 0 || part.rfind("attn_v.", 0) == 0)) {
      units = heads_of_groups(false);
      unit = p.head_dim;
    } else if (hp && part == "attn_output.weight") {
      units = heads_of_groups(true);
      unit = p.head_dim;
      by_cols = true;
    }
    const bool sparsify = (o.unstructured > 0.0 || o.two_of_four) && is_block_matrix(t);
    if (units.empty() && !sparsify) {
      w.add_tensor(t.name, t.dtype, t.shape, t.data);
      if (progress) progress(ti + 1, n, t.name);
      continue;
    }
    std::vector<int64_t> shape = t.shape;
    GgufTensorInfo src = t;
    std::vector<uint8_t> picked;
    if (!units.empty() && !by_cols) {
      // Rows (a vector's entries) of the kept units: their bytes copied, in any type.
      const bool vec = t.shape.size() == 1;
      const size_t rb = row_bytes(t.dtype, vec ? 1 : t.shape.back());
      const auto rows_total = static_cast<int64_t>(t.nbytes / rb);
      for (int64_t u : units)
        for (int64_t r = u * unit; r < (u + 1) * unit; ++r) {
          if (r >= rows_total) return Status::error("prune: tensor '" + t.name + "' is too small");
          picked.insert(picked.end(), t.data + r * rb, t.data + (r + 1) * rb);
        }
      (vec ? shape.back() : shape.front()) = static_cast<int64_t>(units.size()) * unit;
      if (!sparsify) {
        w.add_tensor(t.name, t.dtype, shape, picked.data());
        if (progress) progress(ti + 1, n, t.name);
        continue;
      }
      src.shape = shape;
      src.data = picked.data();
      src.nbytes = picked.size();
    }
    auto v = rows_f32(src);
    if (!v) return v.status();
    std::vector<float> vals = std::move(*v);
    std::vector<float> imp =
        o.imatrix != nullptr ? o.imatrix->importance(t.name) : std::vector<float>{};
    if (by_cols) {
      const int64_t cols = t.shape.back(), rows = static_cast<int64_t>(vals.size()) / cols;
      std::vector<int64_t> keep;
      for (int64_t u : units)
        for (int64_t c = u * unit; c < (u + 1) * unit; ++c) keep.push_back(c);
      const auto kept = static_cast<int64_t>(keep.size());
      std::vector<float> sel(static_cast<size_t>(rows * kept)), ik;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < kept; ++k) sel[r * kept + k] = vals[r * cols + keep[k]];
      if (imp.size() == static_cast<size_t>(cols))
        for (int64_t c : keep) ik.push_back(imp[c]);
      vals = std::move(sel);
      imp = std::move(ik);
      shape.back() = kept;
    }
    if (sparsify && o.two_of_four)
      zero_2of4(vals, shape.back(), imp);
    else if (sparsify)
      zero_smallest(vals, shape.back(), imp, o.unstructured);
    if (Status s = add_rows(w, t.name, t.dtype, shape, vals); !s) return s;
    if (progress) progress(ti + 1, n, t.name);
  }
  return w;
}

}  // namespace nexus
