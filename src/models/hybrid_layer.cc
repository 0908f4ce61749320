// The hybrid block dispatches each layer to the transformer layer type or the Mamba block by the
// config's per-layer kind. For training its saved activations and scratch are the two types'
// lists one after the other (a layer fills its own kind's part, the other stays unused), so that
// every layer has the same layout.
#include "models/hybrid_layer.h"

#include "models/ssm_layer.h"
#include "models/transformer_layer.h"

namespace nexus {
namespace {

template <class T>
std::vector<T> concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class HybridLayer final : public LayerType {
 public:
  void infer(const Model& model, int64_t l, ForwardState& st) const override {
    kind(model.config(), l).infer(model, l, st);
  }
  std::vector<SavedSlot> saved(const ModelConfig& c, int64_t b, int64_t t) const override {
    return concat(transformer_layer().saved(c, b, t), ssm_layer().saved(c, b, t));
  }
  std::vector<ScratchSlot> scratch(const ModelConfig& c, int64_t b, int64_t t) const override {
    return concat(transformer_layer().scratch(c, b, t), ssm_layer().scratch(c, b, t));
  }
  void forward(const LayerPass& p) const override { kind(*p.cfg, p.layer).forward(part(p)); }
  void backward(const LayerPass& p) const override { kind(*p.cfg, p.layer).backward(part(p)); }
  void recompute(const LayerPass& p, bool selective) const override {
    kind(*p.cfg, p.layer).recompute(part(p), selective);
  }

 private:
  static const LayerType& kind(const ModelConfig& c, int64_t l) {
    return c.recurrent_layer(l) ? ssm_layer() : transformer_layer();
  }
  // The pass with its activation and scratch lists starting at the layer's kind's part.
  static LayerPass part(const LayerPass& p) {
    if (!p.cfg->recurrent_layer(p.layer)) return p;
    const ModelConfig& c = *p.cfg;
    LayerPass q = p;
    q.a = p.a + transformer_layer().saved(c, 1, 1).size();
    q.h = p.h ? p.h + transformer_layer().saved(c, 1, 1).size() : nullptr;
    q.scratch = p.scratch + transformer_layer().scratch(c, 1, 1).size();
    return q;
  }
};

}  // namespace

const LayerType& hybrid_layer() {
  static const HybridLayer layer;
  return layer;
}

}  // namespace nexus
