// The distillation teacher: Model::load, one Context, the logits of every position.
#include "distill_teacher.h"

#include <algorithm>

#include "nexus/context.h"
#include "nexus/model.h"

namespace nexus::cli {

struct Teacher::State {
  std::unique_ptr<Model> model;
  std::unique_ptr<Context> ctx;
  int64_t v = 0;
  std::vector<float> out, row;
};

Teacher::Teacher() : st_(std::make_unique<State>()) {}
Teacher::~Teacher() = default;

Result<std::unique_ptr<Teacher>> Teacher::open(const std::string& path, int64_t n_vocab,
                                               int64_t seq, int threads) {
  auto model = Model::load(path);
  if (!model) return model.status();
  if ((*model)->config().n_vocab != n_vocab)
    return Status::error("--teacher " + path + " has " +
                         std::to_string((*model)->config().n_vocab) +
                         " tokens in its vocabulary, the student " + std::to_string(n_vocab) +
                         " (they must share the tokenizer)");
  ContextOptions o;
  o.n_ctx = seq;
  o.max_batch = seq;
  o.n_threads = threads;
  o.kv_type = DType::kF32;
  auto ctx = Context::create(**model, o);
  if (!ctx) return ctx.status();
  std::unique_ptr<Teacher> t(new Teacher);
  t->st_->model = std::move(model).value();
  t->st_->ctx = std::move(ctx).value();
  t->st_->v = n_vocab;
  return t;
}

const float* Teacher::logits(const int32_t* tokens, int rows, int seq) {
  State& s = *st_;
  const auto per = static_cast<size_t>(seq * s.v);
  s.out.resize(per * static_cast<size_t>(rows));
  Batch b;
  for (int r = 0; r < rows; ++r) {
    s.ctx->clear_seq(0);
    b.clear();
    for (int i = 0; i < seq; ++i) b.add(tokens[r * seq + i], i, 0, true);
    Status st = s.ctx->decode(b, &s.row);
    if (!st) throw Error("teacher: " + st.message());
    std::copy(s.row.begin(), s.row.end(), s.out.begin() + static_cast<std::ptrdiff_t>(per * r));
  }
  return s.out.data();
}

}  // namespace nexus::cli
