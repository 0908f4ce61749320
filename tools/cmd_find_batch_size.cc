// `nexus find-batch-size`: the largest micro-batch whose training memory (parameters, gradients,
// optimizer state, activation arena) fits a budget, measured by building the model.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "command.h"
#include "nexus/model.h"
#include "nexus/train/memory_plan.h"
#include "nexus/train/model_shape.h"

namespace nexus::cli {
namespace {

void print_row(const char* name, uint64_t bytes, uint64_t total) {
  std::printf("  %-22s %12llu  %10s  %5.1f%%\n", name, static_cast<unsigned long long>(bytes),
              train::format_bytes(bytes).c_str(),
              total ? 100.0 * static_cast<double>(bytes) / static_cast<double>(total) : 0.0);
}

int find_batch_size_main(int argc, char** argv) {
  CLI::App app{"Largest training micro-batch that fits a memory budget", "nexus find-batch-size"};
  std::string shape, init, budget_text, arch = "llama", precision = "f32";
  train::TrainOptions topts;
  int64_t seq = 0, max_batch = 65536;
  train::OptimizerOptions opt;
  app.add_option("--shape", shape, "model: dim,layers,heads,kv_heads,ffn,vocab");
  app.add_option("--init", init, "or the shape of this GGUF llama/gpt2 model");
  app.add_option("--arch", arch, "architecture of --shape: llama | gpt2")->capture_default_str();
  app.add_flag("--grad-checkpoint", topts.recompute_blocks,
               "recompute each block in backward (less activation memory)");
  app.add_flag("--selective-recompute", topts.selective_recompute,
               "recompute attention probabilities, norms and FFN activation in backward");
  app.add_flag("--optimizer-in-backward", topts.update_in_backward,
               "keep one block's gradients at a time (the update runs in backward)");
  app.add_option("--precision", precision, "f32 | bf16 | f16 (16-bit saved activations)")
      ->capture_default_str();
  app.add_option("--seq", seq, "tokens per sequence")->required();
  app.add_option("--memory-budget", budget_text, "e.g. 4GiB, 512MiB, 1.5GB")->required();
  app.add_option("--optimizer", opt.name, "adamw | sgd | adafactor")->capture_default_str();
  std::string opt_state = "f32";
  app.add_option("--optimizer-state", opt_state, "f32 | bf16 (AdamW's moments)")
      ->capture_default_str();
  app.add_option("--max-batch", max_batch, "largest batch to consider")->capture_default_str();
  if (auto code = parse_args(app, argc, argv, "find-batch-size")) return *code;
  const auto usage = [](const std::string& m) { return fail("find-batch-size", m, kUsageError); };
  if (shape.empty() == init.empty()) return usage("give exactly one of --shape and --init");
  if (!init.empty() && app.count("--arch")) return usage("--arch goes with --shape (--init has one)");
  if (seq <= 0 || max_batch <= 0) return usage("--seq and --max-batch must be > 0");
  auto prec = train::parse_precision(precision);
  if (!prec) return usage("--precision: " + prec.status().message());
  topts.precision = prec.value();
  if (Status st = train::set_optimizer_state(opt_state, &opt); !st) return usage(st.message());
  auto budget = train::parse_byte_size(budget_text);
  if (!budget) return usage("--memory-budget: " + budget.status().message());

  ModelConfig cfg;
  if (!init.empty()) {
    auto m = Model::load(init);
    if (!m) return fail("find-batch-size", m.status().message());
    cfg = m.value()->config();
  } else {
    auto c = train::parse_model_shape(shape);
    if (!c) return usage(c.status().message());
    if (c.value().n_vocab == 0) return usage("--shape needs the vocabulary size as a 6th value");
    cfg = c.value();
    cfg.n_ctx_train = seq;
    if (Status st = train::set_shape_arch(cfg, arch); !st) return usage(st.message());
  }
  topts.row_updates = train::updates_rows(opt);  // as nexus train builds it
  auto fit = train::find_max_batch(cfg, seq, opt, budget.value(), max_batch, topts);
  if (!fit) return fail("find-batch-size", fit.status().message());
  const train::BatchFit& f = fit.value();
  const train::MemoryBreakdown& b = f.at;
  if (f.batch == 0)
    return fail("find-batch-size",
                "even batch 1 needs " + train::format_bytes(b.total()) + " (parameters " +
                    train::format_bytes(b.params) + ", gradients " + train::format_bytes(b.grads) +
                    ", " + opt.name + " state " + train::format_bytes(b.optimizer) +
                    ", activations " + train::format_bytes(b.activations) +
                    "), over the budget of " + train::format_bytes(budget.value()));
  const std::string prec_label = topts.precision == train::Precision::kF32
                                     ? ""
                                     : std::string(train::precision_name(topts.precision)) + ", ";
  const std::string modes = train::memory_modes(topts);
  std::printf("batch %lld (seq %lld, %s%s%s%s) fits %s:\n", static_cast<long long>(f.batch),
              static_cast<long long>(seq), prec_label.c_str(), opt.name.c_str(),
              modes.empty() ? "" : ", ", modes.c_str(),
              train::format_bytes(budget.value()).c_str());
  print_row(topts.precision == train::Precision::kF32 ? "parameters"
                                                     : "parameters (+ copies)",
            b.params, b.total());
  print_row("gradients", b.grads, b.total());
  print_row((opt.name + " state").c_str(), b.optimizer, b.total());
  print_row("activation arena", b.activations, b.total());
  print_row("total", b.total(), b.total());
  if (f.batch < max_batch)
    std::printf("batch %lld would need %s (activations %s); %d models built\n",
                static_cast<long long>(f.batch + 1), train::format_bytes(f.next.total()).c_str(),
                train::format_bytes(f.next.activations).c_str(), f.builds);
  else
    std::printf("(--max-batch %lld reached)\n", static_cast<long long>(max_batch));
  return 0;
}

Register reg({"find-batch-size", "largest training micro-batch that fits a memory budget",
              find_batch_size_main});

}  // namespace
}  // namespace nexus::cli
