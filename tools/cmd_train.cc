// `nexus train`: trains a llama model from scratch (--shape) or fine-tunes one (--init) on a text
// file tokenized with a GGUF model's tokenizer, then exports an F32 GGUF that `nexus run` loads.
#include <cblas.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "command.h"
#include "nexus/profile.h"
#include "io/gguf.h"
#include "nexus/tokenizer.h"
#include "train/optimizer.h"
#include "train/train_model.h"

namespace nexus::cli {
namespace {

// "dim,layers,heads,kv_heads,ffn[,vocab]" into a llama config (vocab 0 = the tokenizer's).
Result<ModelConfig> parse_shape(const std::string& spec) {
  std::vector<int64_t> v;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      v.push_back(std::stoll(item));
    } catch (const std::exception&) {
      return Status::error("--shape: '" + item + "' is not an integer");
    }
  }
  if (v.size() != 5 && v.size() != 6)
    return Status::error("--shape wants dim,layers,heads,kv_heads,ffn[,vocab], got '" + spec + "'");
  for (int64_t x : v)
    if (x <= 0) return Status::error("--shape: every value must be > 0 ('" + spec + "')");
  ModelConfig c;
  c.arch = Arch::kLlama;
  c.arch_name = "llama";
  c.dim = v[0];
  c.n_layers = v[1];
  c.n_heads = v[2];
  c.n_kv_heads = v[3];
  c.ffn_dim = v[4];
  c.n_vocab = v.size() == 6 ? v[5] : 0;
  if (c.dim % c.n_heads != 0) return Status::error("--shape: dim must be a multiple of heads");
  c.head_dim = c.dim / c.n_heads;
  c.rope_dim = c.head_dim;
  c.tied_output = true;
  return c;
}

std::string eta_string(double secs) {
  char buf[32];
  const int s = static_cast<int>(secs + 0.5);
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, s / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  return buf;
}

int train_main(int argc, char** argv) {
  CLI::App app{"Train or fine-tune a llama model on a text file (F32, CPU)", "nexus train"};
  std::string shape_spec, init_path, tok_path, data_path, out, schedule = "cosine";
  int64_t batch = 4, seq = 64, steps = 100, warmup = 0;
  float lr = 1e-3f, min_lr = 0.0f, clip = 1.0f;
  train::AdamWOptions adam;
  uint64_t seed = 1234;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  app.add_option("--shape", shape_spec, "new model: dim,layers,heads,kv_heads,ffn[,vocab]");
  app.add_option("--init", init_path, "fine-tune this GGUF llama model instead of --shape");
  app.add_option("--tokenizer", tok_path,
                 "GGUF model whose tokenizer encodes --data (default: "
                 "the --init model)");
  app.add_option("--data", data_path, "training text (UTF-8)")->required();
  app.add_option("-o,--out", out, "output GGUF model")->required();
  app.add_option("--batch", batch, "sequences per step")->capture_default_str();
  app.add_option("--seq", seq, "tokens per sequence")->capture_default_str();
  app.add_option("--steps", steps, "optimizer steps")->capture_default_str();
  app.add_option("--lr", lr, "peak learning rate")->capture_default_str();
  app.add_option("--min-lr", min_lr, "final learning rate (linear, cosine)")->capture_default_str();
  app.add_option("--warmup", warmup, "linear warmup steps")->capture_default_str();
  app.add_option("--schedule", schedule, "cosine | linear | constant")->capture_default_str();
  app.add_option("--weight-decay", adam.weight_decay, "AdamW decay of matrices")
      ->capture_default_str();
  app.add_option("--clip", clip, "global gradient-norm limit (0: off)")->capture_default_str();
  app.add_option("--seed", seed, "initialisation seed")->capture_default_str();
  app.add_option("-t,--threads", threads, "threads (OpenBLAS GEMMs and attention)")
      ->capture_default_str();
  profile::SessionOptions prof;
  app.add_option("--profile", prof.trace_path, "write a Chrome/Perfetto trace JSON here");
  app.add_flag("--profile-summary", prof.print_summary, "print the phase/op time table to stderr");
  if (auto code = parse_args(app, argc, argv, "train")) return *code;
  if (shape_spec.empty() == init_path.empty())
    return fail("train", "give exactly one of --shape (new model) and --init (fine-tune)");
  if (tok_path.empty()) tok_path = init_path;
  if (tok_path.empty()) return fail("train", "--tokenizer is required with --shape");
  if (batch <= 0 || seq <= 0 || steps <= 0 || threads <= 0)
    return fail("train", "--batch, --seq, --steps and --threads must be > 0");
  train::LrSchedule sched{lr, min_lr, warmup, steps, train::LrDecay::kCosine};
  if (schedule == "linear")
    sched.decay = train::LrDecay::kLinear;
  else if (schedule == "constant")
    sched.decay = train::LrDecay::kConstant;
  else if (schedule != "cosine")
    return fail("train", "unknown --schedule '" + schedule + "' (cosine, linear, constant)");

  auto tok_file = GgufFile::open(tok_path);
  if (!tok_file) return fail("train", tok_file.status().message());
  auto tok = Tokenizer::from_gguf(tok_file.value());
  if (!tok) return fail("train", tok_path + ": " + tok.status().message());
  std::ifstream in(data_path, std::ios::binary);
  if (!in) return fail("train", "cannot read --data " + data_path);
  std::stringstream text;
  text << in.rdbuf();
  const std::vector<int32_t> ids = tok.value()->encode(text.str(), true);
  if (static_cast<int64_t>(ids.size()) < seq + 1)
    return fail("train", data_path + " has " + std::to_string(ids.size()) +
                             " tokens; need at least --seq + 1 = " + std::to_string(seq + 1));

  Result<std::unique_ptr<train::TrainModel>> model = Status::error("unset");
  if (!init_path.empty()) {
    model = train::TrainModel::from_gguf(init_path, batch, seq);
  } else {
    auto cfg = parse_shape(shape_spec);
    if (!cfg) return fail("train", cfg.status().message());
    if (cfg.value().n_vocab == 0) cfg.value().n_vocab = tok.value()->n_vocab();
    if (cfg.value().n_vocab != tok.value()->n_vocab())
      return fail("train", "--shape vocab " + std::to_string(cfg.value().n_vocab) +
                               " != the tokenizer's " + std::to_string(tok.value()->n_vocab()));
    cfg.value().n_ctx_train = seq;
    model = train::TrainModel::create(cfg.value(), batch, seq, {0.02f, seed, true});
  }
  if (!model) return fail("train", model.status().message());
  train::TrainModel& m = *model.value();
  if (m.config().n_vocab < tok.value()->n_vocab())
    return fail("train", "the model's vocabulary is smaller than the tokenizer's");
  // The GEMMs are threaded by OpenBLAS, the attention loops by our pool; they never overlap.
  openblas_set_num_threads(threads);
  m.set_threads(threads);
  train::AdamW opt(m, adam);
  std::fprintf(stderr, "train: %zu params, %zu data tokens, batch %lld x seq %lld, %lld steps\n",
               m.params().size(), ids.size(), static_cast<long long>(batch),
               static_cast<long long>(seq), static_cast<long long>(steps));

  // Batches are consecutive windows of seq + 1 tokens, wrapping around the data.
  const int64_t span = static_cast<int64_t>(ids.size()) - seq;
  std::vector<int32_t> x(batch * seq), y(batch * seq);
  int64_t cursor = 0;
  const auto t0 = std::chrono::steady_clock::now();
  profile::Session profiling(prof);
  for (int64_t s = 0; s < steps; ++s) {
    NEXUS_PROFILE_SCOPE("step");
    NEXUS_PROFILE_NAMED_SCOPE(data_span, "data");
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < seq; ++i) {
        x[b * seq + i] = ids[cursor + i];
        y[b * seq + i] = ids[cursor + i + 1];
      }
      cursor = (cursor + seq) % span;
    }
    data_span.close();
    m.zero_grad();
    float loss;
    {
      NEXUS_PROFILE_SCOPE("forward");
      loss = m.forward(x, y, batch, seq);
    }
    {
      NEXUS_PROFILE_SCOPE("backward");
      m.backward();
    }
    NEXUS_PROFILE_NAMED_SCOPE(opt_span, "optimizer");
    const float norm = clip > 0 ? train::clip_grad_norm(m.grads(), clip) : 0.0f;
    const float step_lr = sched.at(s);
    opt.step(m.params(), m.grads(), step_lr);
    opt_span.close();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double tps = static_cast<double>((s + 1) * batch * seq) / std::max(secs, 1e-9);
    std::fprintf(stderr, "step %lld/%lld  loss %.4f  lr %.2e  norm %.3f  %.0f tok/s  eta %s\n",
                 static_cast<long long>(s + 1), static_cast<long long>(steps), loss, step_lr, norm,
                 tps, eta_string(secs / (s + 1) * (steps - s - 1)).c_str());
  }
  if (Status ps = profiling.finish(); !ps) return fail("train", ps.message());
  const Status st = m.export_gguf(out, &tok_file.value());
  if (!st) return fail("train", st.message());
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

Register reg({"train", "train or fine-tune a llama model on a text file (CPU, F32)", train_main});

}  // namespace
}  // namespace nexus::cli
