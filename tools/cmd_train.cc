// `nexus train`: trains a llama model from scratch (--shape), fine-tunes one (--init) or resumes
// a checkpoint (--resume) on a token file (or raw text), with validation, metrics, a loss plot,
// gradient accumulation and atomic checkpoints; exports an F32 GGUF that `nexus run` loads.

#include <malloc.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <thread>

#include "command.h"
#include "distill_teacher.h"
#include "nexus/core/allocator.h"
#include "nexus/core/format_bytes.h"
#include "nexus/dist/communicator.h"
#include "nexus/dist/data_parallel.h"
#include "nexus/dist/pipeline_parallel.h"
#include "nexus/dist/tensor_parallel.h"
#include "nexus/io/gguf.h"
#include "nexus/profile.h"
#include "nexus/tokenizer.h"
#include "nexus/train/checkpoint.h"
#include "nexus/train/metrics.h"
#include "nexus/train/model_shape.h"
#include "nexus/train/train_data.h"
#include "nexus/train/trainer.h"
#include "plot/loss_plot.h"

namespace nexus::cli {
namespace {

using Clock = std::chrono::steady_clock;

// "f32", "bf16", or "f16, dynamic loss scale 65536" for the start line.
std::string precision_label(const train::TrainSettings& s) {
  std::string r = train::precision_name(s.precision);
  if (s.loss_scale) {
    char buf[64];
    std::snprintf(buf, sizeof buf, ", %s loss scale %g", s.loss_scale->dynamic ? "dynamic" : "fixed",
                  s.loss_scale->init);
    r += buf;
  }
  return r;
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

struct Flags {
  std::string shape, init, tokenizer, resume, data, val, out, schedule = "cosine";
  std::string metrics, plot, ckpt_dir, arch = "llama", precision = "f32", loss_scale;
  std::string attention_layers;
  int64_t ssm_state = 0;
  int64_t memory_segment = 0;  // nexus-ltm
  int64_t sliding_window = 0;  // --shape: attention to the last W tokens
  std::string memory_kind;
  std::string memory_rope;
  int64_t memory_depth = 0, memory_hidden = 0;  // nexus-ltm titans: 0 = not given
  float memory_forget = -1;                     // nexus-ltm titans: < 0 = not given
  std::string optimizer_state = "f32";
  std::string zero = "0", comm_dtype = "f32";  // data parallel under mpirun
  double bucket_mb = 4;
  int tp = 1, pp = 1;         // tensor parallel ranks, pipeline stages
  int64_t micro_batches = 0;  // --pp's micro-batches a step (the accumulation)
  int64_t loss_scale_window = 2000;
  train::TrainOptions train_opts;
  int64_t batch = 4, seq = 64, accum = 1, steps = 100, warmup = 0;
  int64_t eval_interval = 0, eval_batches = 0, ckpt_interval = 0, lr_scale_ref = 0;
  int keep = 2, prefetch = 2;
  bool documents = false;   // each line of --data a sample
  std::string loss_after;   // train only on what follows it in each sample
  bool keep_zeros = false;  // pruned models: zero weights stay zero
  bool quiet = false;       // ranks other than 0 print no progress
  std::string teacher;      // knowledge distillation (nexus distill)
  float temperature = 2.0f, alpha = 0.5f;
  float lr = 1e-3f, min_lr = 0.0f, clip = 1.0f, weight_decay = 0.1f;
  train::OptimizerOptions opt;
  uint64_t seed = 1234;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
};

// The run's settings from the flags of a fresh run (model config filled in later).
Result<train::TrainSettings> settings_from_flags(const Flags& f, const CLI::App& app) {
  train::TrainSettings s;
  s.batch = f.batch, s.seq = f.seq, s.accum = f.accum, s.steps = f.steps;
  s.clip = f.clip, s.seed = f.seed;
  const double scale = f.lr_scale_ref > 0 ? static_cast<double>(f.batch * f.accum) /
                                                static_cast<double>(f.lr_scale_ref)
                                          : 1.0;
  s.schedule = {static_cast<float>(f.lr * scale), static_cast<float>(f.min_lr * scale), f.warmup,
                f.steps, train::LrDecay::kCosine};
  if (f.schedule == "linear")
    s.schedule.decay = train::LrDecay::kLinear;
  else if (f.schedule == "constant")
    s.schedule.decay = train::LrDecay::kConstant;
  else if (f.schedule != "cosine")
    return Status::error("unknown --schedule '" + f.schedule + "' (cosine, linear, constant)");
  auto prec = train::parse_precision(f.precision);
  if (!prec) return Status::error("--precision: " + prec.status().message());
  s.precision = prec.value();
  // Loss scaling: dynamic by default in f16, off otherwise; "none" or a fixed scale on request.
  const std::string ls = f.loss_scale.empty()
                             ? (s.precision == train::Precision::kF16 ? "dynamic" : "none")
                             : f.loss_scale;
  if (ls == "dynamic") {
    s.loss_scale = train::LossScaleOptions{.growth_interval = f.loss_scale_window};
  } else if (ls != "none") {
    char* end = nullptr;
    const float v = std::strtof(ls.c_str(), &end);
    if (end == ls.c_str() || *end != '\0' || !(v > 0) || !std::isfinite(v))
      return Status::error("--loss-scale must be dynamic, none or a positive number, got '" + ls +
                           "'");
    s.loss_scale = train::LossScaleOptions{.init = v, .dynamic = false};
  }
  if (f.loss_scale_window < 1) return Status::error("--loss-scale-window must be >= 1");
  s.optimizer = f.opt;
  NEXUS_RETURN_IF_ERROR(train::set_optimizer_state(f.optimizer_state, &s.optimizer));
  if (app.count("--weight-decay")) {
    s.optimizer.adamw.weight_decay = f.weight_decay;
    s.optimizer.sgd_weight_decay = f.weight_decay;
    s.optimizer.adafactor_weight_decay = f.weight_decay;
  }
  return s;
}

void add_flags(CLI::App& app, Flags& f, profile::SessionOptions& prof) {
  app.set_config("--config", "", "TOML file of flags (keys are the long flag names)");
  app.allow_config_extras(CLI::config_extras_mode::error);
  app.add_option("--shape", f.shape, "new model: dim,layers,heads,kv_heads,ffn[,vocab]");
  app.add_option("--init", f.init, "fine-tune this GGUF model instead of --shape");
  app.add_option("--teacher", f.teacher,
                 "distil from this GGUF model (same vocabulary): KL to its softened outputs plus "
                 "the hard-label loss");
  app.add_option("--temperature", f.temperature, "distillation: softmax temperature T")
      ->capture_default_str();
  app.add_option("--alpha", f.alpha,
                 "distillation: weight of the hard-label loss (1 - alpha: T^2 KL)")
      ->capture_default_str();
  app.add_option(
         "--arch", f.arch,
         "architecture of --shape: llama | qwen2 | qwen3 | gpt2 | mamba | mamba2 | granitehybrid | "
         "nexus-ltm (mamba*: heads, kv_heads and ffn are the scan's heads, groups and inner width)")
      ->capture_default_str();
  app.add_option("--sliding-window", f.sliding_window,
                 "llama, qwen2, qwen3 --shape: each token attends to the last W tokens (Mistral's "
                 "sliding window; 0: all)");
  app.add_option("--memory-segment", f.memory_segment,
                 "nexus-ltm: tokens per segment (each attends to itself and reads the memory of "
                 "the ones before; --seq must be a multiple; default 64)");
  app.add_option("--memory-kind", f.memory_kind,
                 "nexus-ltm: infini (compressive memory) | titans (linear memory, gradient steps "
                 "with momentum and forgetting)");
  app.add_option("--memory-depth", f.memory_depth,
                 "nexus-ltm titans: the memory's layers: 1 (a linear memory, the default) or 2 (an "
                 "MLP, Titans' deep memory)");
  app.add_option("--memory-hidden", f.memory_hidden,
                 "nexus-ltm titans --memory-depth 2: the MLP's hidden width (default 2 x head "
                 "size)");
  app.add_option(
      "--memory-forget", f.memory_forget,
      "nexus-ltm titans: the forgetting rate a new model starts from, in (0, 1) (default "
      "0.02; the memory keeps (1 - rate)^n of a key after n segments)");
  app.add_option("--memory-rope", f.memory_rope,
                 "nexus-ltm: the memory reads q and k before RoPE (content only) or after it "
                 "(rotated by their position in the segment; the default)");
  app.add_option("--ssm-state", f.ssm_state,
                 "mamba, mamba2, granitehybrid: the scan's state size per channel (default 16 for "
                 "mamba, 64 otherwise)");
  app.add_option("--attention-layers", f.attention_layers,
                 "granitehybrid: the attention layers, e.g. 3,7 (default: every 4th from the 4th)");
  app.add_flag("--grad-checkpoint", f.train_opts.recompute_blocks,
               "gradient checkpointing: recompute each block in backward (less memory)");
  app.add_flag("--selective-recompute", f.train_opts.selective_recompute,
               "keep each block's q/k/v and FFN inputs only; recompute the attention "
               "probabilities, norms and FFN activation in backward (no projections)");
  app.add_flag("--keep-zeros", f.keep_zeros,
               "weights that are zero at the start stay zero (fine-tuning a 2:4 or unstructured "
               "pruned model; give it again with --resume)");
  app.add_flag("--optimizer-in-backward", f.train_opts.update_in_backward,
               "update each block as soon as its gradients are complete and reuse their memory "
               "(needs --clip 0, --accum 1, no loss scaling)");
  app.add_option("--precision", f.precision,
                 "f32 | bf16 | f16: activations stored in 16 bits, f32 master weights and math")
      ->capture_default_str();
  app.add_option("--loss-scale", f.loss_scale,
                 "dynamic | none | a fixed scale (default: dynamic with f16, none otherwise)");
  app.add_option("--loss-scale-window", f.loss_scale_window,
                 "dynamic loss scaling: double the scale after N finite steps")
      ->capture_default_str();
  app.add_option("--resume", f.resume,
                 "continue a checkpoint (a file, or a directory: its latest)");
  app.add_option("--tokenizer", f.tokenizer, "GGUF whose tokenizer the model uses (--shape)");
  app.add_option("--data", f.data, "token file (nexus tokenize-data) or UTF-8 text");
  app.add_flag("--documents", f.documents,
               "each line of text --data (each BOS-led run of a token file) is a sample: windows "
               "start at a sample and stop at its end");
  app.add_option("--loss-after", f.loss_after,
                 "train only on what follows the last TEXT in each sample (implies --documents)");
  app.add_option("--val", f.val, "validation data (default: DATA's .val.bin sibling if present)");
  app.add_option("--eval-interval", f.eval_interval, "validate every N steps (0: at the end only)")
      ->capture_default_str();
  app.add_option("--eval-batches", f.eval_batches, "validation batches per pass (0: all)")
      ->capture_default_str();
  app.add_option("-o,--out", f.out, "output GGUF model");
  app.add_option("--batch", f.batch, "sequences per micro-batch")->capture_default_str();
  app.add_option("--seq", f.seq, "tokens per sequence")->capture_default_str();
  app.add_option("--accum", f.accum, "micro-batches per optimizer step")->capture_default_str();
  app.add_option("--steps", f.steps, "optimizer steps")->capture_default_str();
  app.add_option("--lr", f.lr, "peak learning rate")->capture_default_str();
  app.add_option("--lr-scale-ref", f.lr_scale_ref,
                 "scale --lr/--min-lr by (batch * accum) / B (0: off)")
      ->capture_default_str();
  app.add_option("--min-lr", f.min_lr, "final learning rate (linear, cosine)")
      ->capture_default_str();
  app.add_option("--warmup", f.warmup, "linear warmup steps")->capture_default_str();
  app.add_option("--schedule", f.schedule, "cosine | linear | constant")->capture_default_str();
  app.add_option("--optimizer", f.opt.name, "adamw | sgd | adafactor")->capture_default_str();
  app.add_option("--optimizer-state", f.optimizer_state,
                 "f32 | bf16: AdamW's moments in bf16 with stochastic rounding (half the memory)")
      ->capture_default_str();
  app.add_option("--beta1", f.opt.adamw.beta1, "AdamW beta1")->capture_default_str();
  app.add_option("--beta2", f.opt.adamw.beta2, "AdamW beta2")->capture_default_str();
  app.add_option("--eps", f.opt.adamw.eps, "AdamW epsilon")->capture_default_str();
  app.add_option("--weight-decay", f.weight_decay, "decay of matrices (default: AdamW 0.1, SGD and Adafactor 0)");
  app.add_option("--momentum", f.opt.momentum, "SGD momentum")->capture_default_str();
  app.add_flag("--nesterov", f.opt.nesterov, "SGD: Nesterov momentum");
  app.add_option("--adafactor-decay", f.opt.adafactor_decay, "Adafactor: beta2_t = 1 - t^DECAY")
      ->capture_default_str();
  app.add_option("--adafactor-clip", f.opt.adafactor_clip, "Adafactor: update RMS threshold")
      ->capture_default_str();
  app.add_option("--clip", f.clip, "global gradient-norm limit (0: off)")->capture_default_str();
  app.add_option("--seed", f.seed, "initialisation and data-order seed")->capture_default_str();
  app.add_option("--prefetch", f.prefetch, "batches the loader prepares ahead")
      ->capture_default_str();
  app.add_option("-t,--threads", f.threads, "threads (OpenBLAS GEMMs and attention)")
      ->capture_default_str();
  app.add_option("--metrics", f.metrics, "append one JSON line per step here");
  app.add_option("--plot", f.plot, "draw train/validation loss curves (SVG) here");
  app.add_option("--checkpoint-dir", f.ckpt_dir, "write checkpoints (ckpt-NNNNNNNN.gguf) here");
  app.add_option("--checkpoint-interval", f.ckpt_interval,
                 "checkpoint every N steps (0: at the end only)")
      ->capture_default_str();
  app.add_option("--keep-checkpoints", f.keep, "checkpoints to keep")->capture_default_str();
  app.add_option("--zero", f.zero,
                 "data parallel (under mpirun): 0 all-reduces the gradients, 1 also shards the "
                 "optimizer state, 2 the gradients too (ZeRO stages)")
      ->capture_default_str();
  app.add_option("--comm-dtype", f.comm_dtype, "data parallel: gradients sent as f32 | bf16")
      ->capture_default_str();
  app.add_option("--bucket-mb", f.bucket_mb,
                 "data parallel: MiB of gradients per all-reduce, started while backward runs")
      ->capture_default_str();
  app.add_option("--tp", f.tp,
                 "tensor parallel over this many ranks (under mpirun -np N): each holds its "
                 "share of every block's heads and feed-forward width and sees every batch")
      ->capture_default_str();
  app.add_option("--pp", f.pp,
                 "pipeline parallel over this many stages (under mpirun -np N): each holds a run "
                 "of consecutive blocks, micro-batches on the 1F1B schedule")
      ->capture_default_str();
  app.add_option("--micro-batches", f.micro_batches,
                 "pipeline parallel: micro-batches of --batch sequences per step (as --accum)");
  app.add_option("--profile", prof.trace_path, "write a Chrome/Perfetto trace JSON here");
  app.add_flag("--profile-summary", prof.print_summary, "print the phase/op time table to stderr");
}

// Model parallel (--tp N or --pp N under mpirun): the exchange that makes this rank's part of
// the run's full model, and cuts and gathers between the two.
struct TpTrain {
  dist::Communicator* comm = nullptr;
  int tp = 1, pp = 1;
  std::unique_ptr<dist::ModelParallel> training;
  size_t full_params = 0;
  bool on() const { return tp > 1 || pp > 1; }
};

// A full-size model to stage parameters in (checkpoints, the export, the start of a tensor
// parallel run): one token of activations and one block's gradients.
train::TrainOptions staging_options() {
  train::TrainOptions o;
  o.update_in_backward = true;
  return o;
}
Result<std::unique_ptr<train::TrainModel>> staging_model(const ModelConfig& cfg,
                                                         train::InitOptions init = {}) {
  return train::TrainModel::create(cfg, 1, 1, init, staging_options());
}
train::InitOptions zero_init() {
  train::InitOptions i;
  i.random = false;
  return i;
}

// --tp, --pp: this rank's part of `full` for (batch, seq) steps, its parameters cut from full's.
Result<std::unique_ptr<train::TrainModel>> slice_of(const train::TrainModel& full, int64_t batch,
                                                    int64_t seq, train::TrainOptions topts,
                                                    TpTrain& tp) {
  if (tp.tp > 1) {
    NEXUS_RETURN_IF_ERROR(check_tensor_parallel(full.config(), tp.tp));
    tp.training =
        std::make_unique<dist::TensorParallelTraining>(*tp.comm, full.config(), full.tensors());
  } else {
    NEXUS_RETURN_IF_ERROR(dist::check_pipeline(full.config(), tp.pp));
    tp.training = std::make_unique<dist::PipelineTraining>(*tp.comm, full.config(), full.tensors());
  }
  tp.full_params = full.params().size();
  tp.training->configure(&topts);
  auto m = train::TrainModel::create(tp.training->part_config(), batch, seq, zero_init(), topts);
  if (!m) return m.status();
  const std::span<const train::ParamInfo> want = tp.training->part_tensors();
  const std::vector<train::ParamInfo>& have = m.value()->tensors();
  for (size_t i = 0; i < have.size(); ++i)
    NEXUS_CHECK(have.size() == want.size() && have[i].name == want[i].name &&
                    have[i].offset == want[i].offset && have[i].shape == want[i].shape,
                "[tensor parallel] the slice's layout differs at " + have[i].name);
  tp.training->cut(full.params(), m.value()->params());
  return m;
}

// Everything a run needs once the flags are resolved.
struct Run {
  train::TrainSettings settings;
  std::unique_ptr<train::TrainModel> model;
  std::unique_ptr<train::Optimizer> optimizer;
  std::shared_ptr<const GgufFile> tokenizer_gguf;  // tokenizer.* keys for checkpoints / export
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<train::Checkpoint> resumed;
};

// --resume: settings, model, optimizer and tokenizer from the checkpoint.
Result<Run> resume_run(const Flags& f, const CLI::App& app, int world, TpTrain& tp) {
  for (const char* flag : {"--shape",
                           "--init",
                           "--arch",
                           "--memory-segment",
                           "--memory-kind",
                           "--memory-rope",
                           "--tokenizer",
                           "--batch",
                           "--seq",
                           "--accum",
                           "--lr",
                           "--lr-scale-ref",
                           "--min-lr",
                           "--warmup",
                           "--schedule",
                           "--optimizer",
                           "--beta1",
                           "--beta2",
                           "--eps",
                           "--optimizer-state",
                           "--weight-decay",
                           "--momentum",
                           "--nesterov",
                           "--adafactor-decay",
                           "--adafactor-clip",
                           "--clip",
                           "--seed",
                           "--precision",
                           "--loss-scale",
                           "--loss-scale-window"})
    if (app.count(flag))
      return Status::error(std::string(flag) +
                           " is fixed by the checkpoint; leave it out with "
                           "--resume");
  std::string path = f.resume;
  if (std::filesystem::is_directory(path)) {
    auto latest = train::latest_checkpoint(path);
    if (!latest) return latest.status();
    path = latest.value();
  }
  auto ckpt = train::Checkpoint::open(path);
  if (!ckpt) return ckpt.status();
  Run r;
  r.resumed = std::move(ckpt).value();
  const train::Checkpoint& c = *r.resumed;
  r.settings = c.settings();
  // The checkpoint's batch is the global one (every rank's): split it over this run's ranks.
  if (r.settings.batch % world != 0)
    return Status::error(c.path() + ": its global batch of " + std::to_string(r.settings.batch) +
                         " sequences does not split over " + std::to_string(world) + " ranks");
  r.settings.batch /= world;
  if (app.count("--steps")) {
    if (f.steps < c.progress().step)
      return Status::error("--steps " + std::to_string(f.steps) +
                           " is below the checkpoint's step " + std::to_string(c.progress().step));
    r.settings.steps = r.settings.schedule.total_steps = f.steps;
  }
  if (!c.has_tokenizer()) return Status::error(c.path() + " holds no tokenizer");
  r.tokenizer_gguf = std::make_shared<const GgufFile>(c.file());
  auto tok = Tokenizer::from_gguf(c.file());
  if (!tok) return Status::error(c.path() + ": " + tok.status().message());
  r.tokenizer = std::move(tok).value();
  train::TrainOptions topts = f.train_opts;
  topts.precision = r.settings.precision;
  topts.row_updates = train::updates_rows(r.settings.optimizer);
  if (tp.on()) {
    // The checkpoint holds the full model: restored into a staging copy, then cut.
    auto full = staging_model(r.settings.model, zero_init());
    if (!full) return full.status();
    NEXUS_RETURN_IF_ERROR(c.restore_model(*full.value()));
    auto full_opt = train::make_optimizer(*full.value(), r.settings.optimizer);
    if (!full_opt) return full_opt.status();
    NEXUS_RETURN_IF_ERROR(c.restore_optimizer(*full_opt.value()));
    auto m = slice_of(*full.value(), r.settings.batch, r.settings.seq, topts, tp);
    if (!m) return m.status();
    r.model = std::move(m).value();
    auto opt = train::make_optimizer(*r.model, r.settings.optimizer);
    if (!opt) return opt.status();
    r.optimizer = std::move(opt).value();
    NEXUS_RETURN_IF_ERROR(tp.training->cut_state(*full_opt.value(), *r.optimizer));
  } else {
    auto m =
        train::TrainModel::create(r.settings.model, r.settings.batch, r.settings.seq, {}, topts);
    if (!m) return m.status();
    r.model = std::move(m).value();
    NEXUS_RETURN_IF_ERROR(c.restore_model(*r.model));
    auto opt = train::make_optimizer(*r.model, r.settings.optimizer);
    if (!opt) return opt.status();
    r.optimizer = std::move(opt).value();
    NEXUS_RETURN_IF_ERROR(c.restore_optimizer(*r.optimizer));
  }
  if (!f.quiet)
    std::fprintf(stderr, "train: resuming %s at step %lld of %lld\n", c.path().c_str(),
                 static_cast<long long>(c.progress().step),
                 static_cast<long long>(r.settings.steps));
  return r;
}

// A fresh run: --shape with --tokenizer, or --init.
// make_opt false: the caller makes the optimizer (ZeRO's is over a shard only, and the full one
// would raise the peak memory for nothing).
Result<Run> new_run(const Flags& f, const CLI::App& app, bool make_opt, TpTrain& tp) {
  if (f.shape.empty() == f.init.empty())
    return Status::error(
        "give exactly one of --shape (new model), --init (fine-tune) and "
        "--resume (continue a checkpoint)");
  Run r;
  auto s = settings_from_flags(f, app);
  if (!s) return s.status();
  r.settings = s.value();
  const std::string tok_path = f.tokenizer.empty() ? f.init : f.tokenizer;
  if (tok_path.empty()) return Status::error("--tokenizer is required with --shape");
  auto tf = GgufFile::open(tok_path);
  if (!tf) return tf.status();
  r.tokenizer_gguf = std::make_shared<const GgufFile>(std::move(tf).value());
  auto tok = Tokenizer::from_gguf(*r.tokenizer_gguf);
  if (!tok) return Status::error(tok_path + ": " + tok.status().message());
  r.tokenizer = std::move(tok).value();
  Result<std::unique_ptr<train::TrainModel>> model = Status::error("unset");
  train::TrainOptions topts = f.train_opts;
  topts.precision = r.settings.precision;
  topts.row_updates = train::updates_rows(r.settings.optimizer);
  if (!f.init.empty()) {
    if (app.count("--arch"))
      return Status::error("--arch goes with --shape; --init takes the file's architecture");
    // The memory's shape and starting rates are the file's too.
    for (const char* flag : {"--memory-segment", "--memory-kind", "--memory-depth",
                             "--memory-hidden", "--memory-forget", "--memory-rope"})
      if (app.count(flag))
        return Status::error(std::string(flag) +
                             " goes with --shape; --init takes the file's memory");
    model = tp.on() ? train::TrainModel::from_gguf(f.init, 1, 1, staging_options())
                    : train::TrainModel::from_gguf(f.init, f.batch, f.seq, topts);
  } else {
    auto cfg = train::parse_model_shape(f.shape);
    if (!cfg) return cfg.status();
    if (cfg.value().n_vocab == 0) cfg.value().n_vocab = r.tokenizer->n_vocab();
    cfg.value().n_ctx_train = f.seq;
    NEXUS_RETURN_IF_ERROR(train::set_shape_arch(cfg.value(), f.arch));
    if (!f.attention_layers.empty())
      NEXUS_RETURN_IF_ERROR(train::set_attention_layers(cfg.value(), f.attention_layers));
    if (f.memory_segment != 0) {
      if (cfg.value().arch != Arch::kLtm || f.memory_segment < 0)
        return Status::error("--memory-segment takes a positive size and --arch nexus-ltm");
      cfg.value().memory_segment = f.memory_segment;
    }
    if (f.sliding_window != 0) {
      const Arch a = cfg.value().arch;
      if (f.sliding_window < 0 || (a != Arch::kLlama && a != Arch::kQwen2 && a != Arch::kQwen3))
        return Status::error(
            "--sliding-window takes a positive size and --arch llama, qwen2 "
            "or qwen3");
      cfg.value().sliding_window = f.sliding_window;
    }
    if (!f.memory_kind.empty()) {
      if (cfg.value().arch != Arch::kLtm ||
          (f.memory_kind != "infini" && f.memory_kind != "titans"))
        return Status::error("--memory-kind takes infini or titans, with --arch nexus-ltm");
      cfg.value().memory_kind =
          f.memory_kind == "titans" ? MemoryKind::kTitans : MemoryKind::kInfini;
    }
    if (f.memory_depth != 0 || f.memory_hidden != 0) {
      ModelConfig& c = cfg.value();
      if (c.arch != Arch::kLtm || c.memory_kind != MemoryKind::kTitans)
        return Status::error(
            "--memory-depth and --memory-hidden take --arch nexus-ltm --memory-kind titans");
      const int64_t depth = f.memory_depth != 0 ? f.memory_depth : 2;
      if (depth != 1 && depth != 2)
        return Status::error("--memory-depth takes 1 (linear) or 2 (an MLP), got " +
                             std::to_string(f.memory_depth));
      if (depth == 1 && f.memory_hidden != 0)
        return Status::error("--memory-hidden takes --memory-depth 2");
      if (f.memory_hidden < 0) return Status::error("--memory-hidden takes a positive width");
      if (depth == 2) c.memory_hidden = f.memory_hidden > 0 ? f.memory_hidden : 2 * c.head_dim;
    }
    train::InitOptions init{0.02f, f.seed, true};
    if (f.memory_forget >= 0) {
      if (cfg.value().arch != Arch::kLtm || cfg.value().memory_kind != MemoryKind::kTitans)
        return Status::error("--memory-forget takes --arch nexus-ltm --memory-kind titans");
      if (!(f.memory_forget > 0 && f.memory_forget < 1))
        return Status::error("--memory-forget takes a rate in (0, 1), got " +
                             std::to_string(f.memory_forget));
      init.memory_forget = f.memory_forget;
    }
    if (!f.memory_rope.empty()) {
      if (cfg.value().arch != Arch::kLtm || (f.memory_rope != "before" && f.memory_rope != "after"))
        return Status::error("--memory-rope takes before or after, with --arch nexus-ltm");
      cfg.value().memory_before_rope = f.memory_rope == "before";
    }
    if (f.ssm_state != 0) {
      if (!cfg.value().has_recurrent() || f.ssm_state < 0)
        return Status::error("--ssm-state takes a positive size and a state-space --arch");
      cfg.value().ssm_state = f.ssm_state;
    }
    model = tp.on() ? staging_model(cfg.value(), init)
                    : train::TrainModel::create(cfg.value(), f.batch, f.seq, init, topts);
  }
  if (!model) return model.status();
  r.model = std::move(model).value();
  r.settings.model = r.model->config();  // the full model's, under tensor parallel too
  if (tp.on()) {
    auto slice = slice_of(*r.model, f.batch, f.seq, topts, tp);
    if (!slice) return slice.status();
    r.model = std::move(slice).value();
  }
  if (!make_opt) return r;
  auto opt = train::make_optimizer(*r.model, r.settings.optimizer);
  if (!opt) return opt.status();
  r.optimizer = std::move(opt).value();
  return r;
}

int train_ranks(CLI::App& app, Flags& f, profile::SessionOptions& prof, const char* cmd,
                dist::Communicator& comm, int zero, dist::CommDType comm_dtype, TpTrain& tp);

int train_command(int argc, char** argv, const char* cmd) {
  CLI::App app{"Train or fine-tune a llama, qwen2, qwen3, gpt2, mamba, mamba2 or granitehybrid model (CPU; f32, bf16 or f16)", std::string("nexus ") + cmd};
  Flags f;
  profile::SessionOptions prof;
  add_flags(app, f, prof);
  if (auto code = parse_args(app, argc, argv, cmd)) return *code;
  auto usage = [cmd](const std::string& m) { return fail(cmd, m, kUsageError); };
  if (f.batch <= 0 || f.seq <= 0 || f.steps <= 0 || f.threads <= 0 || f.accum <= 0)
    return usage("--batch, --seq, --steps, --accum and --threads must be > 0");
  if (f.eval_interval < 0 || f.eval_batches < 0 || f.ckpt_interval < 0 || f.lr_scale_ref < 0 ||
      f.prefetch < 0)
    return usage(
        "--eval-interval, --eval-batches, --checkpoint-interval, --lr-scale-ref and --prefetch "
        "must be >= 0");
  if (f.keep < 1) return usage("--keep-checkpoints must be >= 1");
  // The schedule and clipping flags before any data is read (train::validate checks the values a
  // run ends up with, a resumed one's included).
  if (!std::isfinite(f.lr) || f.lr < 0 || !std::isfinite(f.min_lr) || f.min_lr < 0)
    return usage("--lr and --min-lr must be finite and >= 0");
  if (f.warmup < 0) return usage("--warmup must be >= 0");
  if (!std::isfinite(f.clip) || f.clip < 0) return usage("--clip must be finite and >= 0 (0: off)");
  if (f.out.empty() && f.ckpt_dir.empty())
    return usage("give -o (the trained model) and/or --checkpoint-dir");
  if (f.ckpt_interval > 0 && f.ckpt_dir.empty())
    return usage("--checkpoint-interval needs --checkpoint-dir");
  if (f.resume.empty() && f.data.empty()) return usage("--data is required");
  if (!f.out.empty())
    if (auto m = overwrites_source(f.out, {f.init, f.tokenizer, f.data, f.val, f.resume}))
      return usage(*m);

  int zero = 0;
  dist::CommDType comm_dtype = dist::CommDType::kF32;
  if (Status st = dist::parse_zero(f.zero, &zero); !st) return usage(st.message());
  if (Status st = dist::parse_comm_dtype(f.comm_dtype, &comm_dtype); !st)
    return usage(st.message());
  if (!(f.bucket_mb > 0) || !std::isfinite(f.bucket_mb)) return usage("--bucket-mb must be > 0");
  if (!dist::mpi_built() && (zero > 0 || app.count("--comm-dtype") || f.tp > 1))
    return usage(std::string(zero > 0   ? "--zero"
                             : f.tp > 1 ? "--tp"
                                        : "--comm-dtype") +
                 ": " + dist::mpi_missing_hint());
  if (f.tp < 1 || f.pp < 1) return usage("--tp and --pp must be >= 1");
  if (f.tp > 1 && f.pp > 1)
    return usage("--tp and --pp: use one of them (they do not combine yet)");
  if (!dist::mpi_built() && f.pp > 1) return usage("--pp: " + dist::mpi_missing_hint());
  if (f.micro_batches != 0) {
    if (f.pp == 1) return usage("--micro-batches goes with --pp (without it, use --accum)");
    if (f.micro_batches < 1) return usage("--micro-batches must be >= 1");
    if (app.count("--accum") && f.accum != f.micro_batches)
      return usage("--micro-batches and --accum are the same setting under --pp; give one");
    f.accum = f.micro_batches;
  }
  auto made_comm = dist::make_communicator();
  if (!made_comm) return fail(cmd, made_comm.status().message());
  std::unique_ptr<dist::Communicator> comm = std::move(made_comm).value();
  const int world = comm->size();
  TpTrain tp;
  if (f.tp > 1 || f.pp > 1) {
    const std::string flag = f.tp > 1 ? "--tp" : "--pp";
    const int n = std::max(f.tp, f.pp);
    if (Status st = dist::check_model_parallel_ranks(flag, n, world); !st)
      return usage(st.message());
    if (zero > 0 || app.count("--comm-dtype"))
      return usage(flag + ": " + (f.tp > 1 ? "tensor" : "pipeline") +
                   " parallel uses every rank for one model, so there is no data parallel to "
                   "shard (--zero) or compress (--comm-dtype)");
    if (f.train_opts.update_in_backward)
      return usage("--optimizer-in-backward does not combine with " + flag);
    if (f.pp > 1 && (!f.teacher.empty() || !f.val.empty() || f.eval_interval > 0))
      return usage(
          "--pp: distillation and validation passes are not pipelined; leave out "
          "--teacher, --val and --eval-interval");
    tp.comm = comm.get();
    tp.tp = f.tp;
    tp.pp = f.pp;
  }
  if ((world > 1 || zero > 0) && f.train_opts.update_in_backward)
    return usage(
        "--optimizer-in-backward: data parallel exchanges the gradients after backward "
        "(--zero 2 keeps one block's gradients at a time instead)");
  // ZeRO 2: the model hands each block's gradients over as backward finishes them and reuses
  // their buffer, as it does for the optimizer in backward.
  if (zero == 2) f.train_opts.update_in_backward = true;
  if (world > 1 && !app.count("--threads"))  // the ranks share this machine's cores
    f.threads = std::max(1, f.threads / world);
  f.quiet = comm->rank() != 0;
  int rc;
  try {
    rc = train_ranks(app, f, prof, cmd, *comm, zero, comm_dtype, tp);
  } catch (const std::exception& e) {
    rc = fail(cmd, world > 1 ? "rank " + std::to_string(comm->rank()) + ": " + e.what() : e.what());
  }
  // A rank that cannot go on ends the job: the others would wait in a collective for ever.
  if (rc != 0 && world > 1) comm->abort(rc);
  return rc;
}

// The run itself, on every rank alike; rank 0 alone prints progress and writes files.
int train_ranks(CLI::App& app, Flags& f, profile::SessionOptions& prof, const char* cmd,
                dist::Communicator& comm, int zero, dist::CommDType comm_dtype, TpTrain& tp) {
  const int world = comm.size(), rank = comm.rank();
  // The ranks that split the batches: all of them in data parallel, one group in tensor parallel.
  const int dp_world = tp.on() ? 1 : world;
  const bool leader = rank == 0;
  auto fail = [&](const std::string& cmd_name, const std::string& m, int code = 1) {
    return cli::fail(cmd_name, world > 1 ? "rank " + std::to_string(rank) + ": " + m : m, code);
  };
  auto usage = [&](const std::string& m) { return fail(cmd, m, kUsageError); };
  auto made = f.resume.empty() ? new_run(f, app, zero == 0, tp) : resume_run(f, app, dp_world, tp);
  if (!made) return fail(cmd, made.status().message());
  Run& r = made.value();
  train::TrainSettings& s = r.settings;
  train::TrainModel& m = *r.model;
  // Every rank starts from rank 0's parameters (the same seed gives the same ones; this makes
  // sure).
  // (Tensor parallel ranks hold different slices, each cut from the same full model.)
  if (world > 1 && !tp.on()) comm.broadcast(m.params().data(), m.params().size_bytes(), 0);

  // Data: --data (default on resume: the checkpoint's), --val (default: the .val.bin sibling).
  if (!f.data.empty()) s.data_path = f.data;
  if (s.data_path.empty()) return usage("--data is required");
  if (!f.val.empty())
    s.val_path = f.val;
  else if (!r.resumed && tp.pp == 1 && std::filesystem::exists(train::val_path_for(s.data_path)) &&
           train::is_token_file(s.data_path))
    s.val_path = train::val_path_for(s.data_path);
  if (f.documents) s.documents = true;
  if (app.count("--loss-after")) {
    if (f.loss_after.empty()) return usage("--loss-after needs a non-empty TEXT");
    s.loss_after = f.loss_after;
    s.documents = true;
  }
  auto made_data =
      train::open_training_data(s.data_path, *r.tokenizer, {s.documents, s.loss_after});
  if (!made_data) return fail(cmd, made_data.status().message());
  const std::optional<Documents> documents = std::move(made_data.value().documents);
  Result<TokenFile> data = std::move(made_data.value().file);
  const int64_t n_vocab = m.config().n_vocab;
  if (Status st = train::check_vocabulary(data.value(), *r.tokenizer, n_vocab, s.data_path); !st)
    return fail(cmd, st.message());
  s.tokenizer_fingerprint = data.value().header().tokenizer_hash;
  std::optional<TokenFile> val;
  if (!s.val_path.empty()) {
    auto opened = train::open_training_data(s.val_path, *r.tokenizer);
    if (!opened) return fail(cmd, opened.status().message());
    Result<TokenFile> v = std::move(opened.value().file);
    if (Status st = train::check_vocabulary(v.value(), *r.tokenizer, n_vocab, s.val_path); !st)
      return fail(cmd, st.message());
    if (Status st =
            DataLoader::check(v.value(), static_cast<int>(s.batch), static_cast<int>(s.seq));
        !st)
      return fail(cmd, st.message());
    val = std::move(v).value();
  }
  if (Status st = DataLoader::check(data.value(), static_cast<int>(s.batch),
                                    static_cast<int>(s.seq), documents ? &*documents : nullptr);
      !st)
    return fail(cmd, st.message());
  DataLoader loader(data.value(), static_cast<int>(s.batch), static_cast<int>(s.seq), s.seed,
                    f.prefetch, tp.on() ? 0 : rank, dp_world, documents ? &*documents : nullptr);
  if (documents && leader)
    std::fprintf(stderr, "%s: %zu samples%s%s%s\n", cmd, documents->size(),
                 s.loss_after.empty() ? "" : ", training on what follows '", s.loss_after.c_str(),
                 s.loss_after.empty() ? "" : "'");
  std::optional<SequentialBatches> val_batches;
  if (val) val_batches.emplace(*val, static_cast<int>(s.batch), static_cast<int>(s.seq));
  // The token files are open and checked: the tokenizer's tables are not needed again
  // (checkpoints and the export copy its GGUF keys), so give their heap back.
  r.tokenizer.reset();
  malloc_trim(0);

  train::TrainerOptions topts{s.steps, s.accum, s.schedule, s.clip, s.loss_scale};
  topts.keep_zeros = f.keep_zeros;
  std::unique_ptr<Teacher> teacher;
  if (!f.teacher.empty()) {
    if (!(f.temperature > 0) || !std::isfinite(f.temperature))
      return usage("--temperature must be > 0");
    if (!(f.alpha >= 0 && f.alpha <= 1)) return usage("--alpha must be in [0, 1]");
    auto t = Teacher::open(f.teacher, n_vocab, s.seq, f.threads);
    if (!t) return fail(cmd, t.status().message());
    teacher = std::move(t).value();
    topts.distill = train::TrainerOptions::Distill{
        [&teacher](const nexus::Batch& b) {
          return teacher->logits(b.inputs.data(), b.rows, b.seq_len);
        },
        f.temperature, f.alpha};
    if (leader)
      std::fprintf(stderr, "%s: teacher %s, temperature %g, alpha %g\n", cmd, f.teacher.c_str(),
                   f.temperature, f.alpha);
  } else if (app.count("--temperature") || app.count("--alpha")) {
    return usage("--temperature and --alpha need --teacher");
  }
  if (Status st = train::validate(topts); !st) return usage(st.message());
  if (m.options().update_in_backward && zero != 2)
    if (Status st = train::check_update_in_backward(topts, *r.optimizer); !st)
      return usage("--optimizer-in-backward: " + st.message());
  // Data parallel: the exchange, and under ZeRO 1 an optimizer over this rank's shard only.
  dist::DataParallel dp(comm, m.tensors(), m.params().size(),
                        {zero, comm_dtype, static_cast<size_t>(f.bucket_mb * (1 << 20))});
  if (zero >= 1) {
    auto shard = train::make_optimizer(dp.shard_tensors(), s.optimizer);
    if (!shard) return fail(cmd, shard.status().message());
    if (r.resumed) dp.scatter_state(*r.optimizer, *shard.value());
    r.optimizer = std::move(shard).value();
  }
  if (world > 1 || zero > 0) topts.exchange = &dp;
  if (tp.on()) topts.exchange = tp.training.get();
  // Owned apart so that it and the optimizer can be given back before the export (below).
  auto trainer_owner = std::make_unique<train::Trainer>(m, *r.optimizer, loader, topts);
  train::Trainer& trainer = *trainer_owner;
  int64_t first_step = 0;
  if (r.resumed) {
    const train::TrainProgress& p = r.resumed->progress();
    try {
      loader.restore(p.loader);
    } catch (const Error& e) {
      return fail(cmd, r.resumed->path() + ": " + e.what());
    }
    trainer.set_progress(p.step, p.tokens);
    if (train::LossScaler* ls = trainer.loss_scaler())
      ls->restore(p.loss_scale, p.loss_scale_good, p.skipped_steps);
    first_step = p.step;
  }

  std::unique_ptr<train::MetricsLog> metrics;
  if (!f.metrics.empty() && leader) {
    auto ml = train::MetricsLog::open(f.metrics, r.resumed ? first_step : -1);
    if (!ml) return fail(cmd, ml.status().message());
    metrics = std::move(ml).value();
  }
  if (!f.ckpt_dir.empty() && leader) {
    std::error_code ec;
    std::filesystem::create_directories(f.ckpt_dir, ec);
    if (!std::filesystem::is_directory(f.ckpt_dir))
      return fail(cmd, "cannot create --checkpoint-dir '" + f.ckpt_dir + "'");
    // A new run would prune another run's checkpoints as if they were its own.
    if (const std::vector<std::string> old = train::list_checkpoints(f.ckpt_dir);
        !r.resumed && !old.empty())
      return usage("--checkpoint-dir '" + f.ckpt_dir + "' holds another run's checkpoints (" +
                   old.back() + "); continue it with --resume '" + f.ckpt_dir +
                   "' or give an empty directory");
  }

  // Every op, the GEMMs included, is threaded by the model's pool (OpenBLAS on one thread).
  m.set_threads(f.threads);
  r.optimizer->set_threads(f.threads);
  const std::string opt_label =
      std::string(r.optimizer->name()) +
      (s.optimizer.name == "adamw" && s.optimizer.adamw.bf16_state ? " (bf16 state)" : "");
  train::TrainOptions shown = f.train_opts;
  if (zero == 2) shown.update_in_backward = false;  // said in the data parallel line
  const std::string modes = train::memory_modes(shown);
  if (leader && tp.pp > 1)
    std::fprintf(stderr,
                 "train: pipeline parallel over %d stages (%s, %s), 1F1B over %lld micro-batches "
                 "a step: rank 0 holds %zu of the model's %zu parameters\n",
                 world, comm.name(), comm.transport().c_str(), static_cast<long long>(s.accum),
                 m.params().size(), tp.full_params);
  if (leader && tp.tp > 1)
    std::fprintf(stderr,
                 "train: tensor parallel over %d ranks (%s, %s): each holds %zu of the model's "
                 "%zu parameters (1/%d of every block), 4 sums of %lld floats a block each step\n",
                 world, comm.name(), comm.transport().c_str(), m.params().size(), tp.full_params,
                 world, static_cast<long long>(s.batch * s.seq * s.model.dim));
  if (leader && (world > 1 || zero > 0) && !tp.on())
    std::fprintf(
        stderr,
        "train: data parallel over %d ranks (%s, %s), ZeRO %d, gradients as %s, "
        "%.2f MB sent per step by each rank%s\n",
        world, comm.name(), comm.transport().c_str(), zero,
        comm_dtype == dist::CommDType::kBF16 ? "bf16" : "f32", dp.bytes_per_step() / 1e6,
        zero >= 1 ? (", optimizer state " + format_bytes(r.optimizer->state_bytes()) + " per rank")
                        .c_str()
                  : "");
  if (leader)
    std::fprintf(stderr,
                 "train: %s, %zu params, %llu data tokens%s, batch %s%lld x seq %lld x accum %lld, "
                 "%s, %lld steps, %s, activations %.1f MiB%s\n",
                 m.config().arch_name.c_str(), tp.on() ? tp.full_params : m.params().size(),
                 static_cast<unsigned long long>(data.value().size()),
                 val ? (", " + std::to_string(val->size()) + " validation tokens").c_str() : "",
                 dp_world > 1 ? (std::to_string(dp_world) + " ranks x ").c_str() : "",
                 static_cast<long long>(s.batch), static_cast<long long>(s.seq),
                 static_cast<long long>(s.accum), opt_label.c_str(),
                 static_cast<long long>(s.steps), precision_label(s).c_str(),
                 static_cast<double>(m.activation_bytes().total()) / (1 << 20),
                 modes.empty() ? "" : (" (" + modes + ")").c_str());

  std::vector<train::MetricsRecord> history;
  auto save = [&](int64_t step) -> Status {
    const auto t0 = Clock::now();
    // ZeRO 1 and 2: the shards' state gathered into a full-size optimizer on rank 0 for the
    // write, and given back after it (held for the run, it would undo ZeRO on rank 0).
    std::unique_ptr<train::Optimizer> gathered;
    train::Optimizer* opt = r.optimizer.get();
    // Tensor parallel: the slices gathered into a full model on rank 0 (the checkpoint is the
    // one-process format, so it resumes on any --tp or none).
    std::unique_ptr<train::TrainModel> full;
    const train::TrainModel* written = &m;
    if (tp.on()) {
      if (leader) {
        auto fm = staging_model(s.model, zero_init());
        if (!fm) return fm.status();
        full = std::move(fm).value();
        auto fo = train::make_optimizer(*full, s.optimizer);
        if (!fo) return fo.status();
        gathered = std::move(fo).value();
      }
      tp.training->gather(m.params(), full ? full->params() : std::span<float>());
      NEXUS_RETURN_IF_ERROR(tp.training->gather_state(*r.optimizer, gathered.get()));
      opt = gathered.get();
      written = full.get();
    }
    if (zero >= 1) {
      if (leader) {
        auto full = train::make_optimizer(m, s.optimizer);
        if (!full) return full.status();
        gathered = std::move(full).value();
      }
      dp.gather_state(*r.optimizer, gathered.get());
      opt = gathered.get();
    }
    if (!leader) return Status::ok();
    const std::string path = train::checkpoint_path(f.ckpt_dir, step);
    train::TrainProgress p{step, trainer.tokens(), loader.state()};
    if (const train::LossScaler* ls = trainer.loss_scaler()) {
      p.loss_scale = ls->scale();
      p.loss_scale_good = ls->good_steps();
      p.skipped_steps = ls->skipped_steps();
    }
    // The checkpoint holds the global batch, so a run resumes on any number of ranks dividing it.
    train::TrainSettings global = s;
    global.batch = s.batch * dp_world;
    NEXUS_RETURN_IF_ERROR(
        train::save_checkpoint(path, global, p, *written, *opt, r.tokenizer_gguf.get()));
    NEXUS_RETURN_IF_ERROR(train::prune_checkpoints(f.ckpt_dir, f.keep));
    std::fprintf(stderr, "checkpoint %s (%.1f MB, %.3f s)\n", path.c_str(),
                 static_cast<double>(std::filesystem::file_size(path)) / 1e6,
                 std::chrono::duration<double>(Clock::now() - t0).count());
    return Status::ok();
  };

  const auto t0 = Clock::now();
  if (!leader) prof = {};  // one trace and one table: rank 0's
  profile::Session profiling(prof);
  while (!trainer.done()) {
    const train::StepStats st = trainer.step();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    const int64_t done_here = st.step - first_step;
    train::MetricsRecord rec;
    rec.step = st.step;
    rec.loss = st.loss;
    rec.lr = st.lr;
    rec.grad_norm = st.grad_norm;
    rec.tokens = st.tokens;
    rec.elapsed_s = secs;
    if (trainer.loss_scaler()) rec.loss_scale = st.loss_scale;
    rec.skipped = st.skipped;
    rec.tokens_per_s = static_cast<double>(done_here * s.batch * s.seq * s.accum * dp_world) /
                       std::max(secs, 1e-9);
    const bool last = trainer.done();
    // (Every tensor parallel rank takes part in the evaluation's forward passes.)
    if ((leader || tp.on()) && val_batches &&
        (last || (f.eval_interval > 0 && st.step % f.eval_interval == 0)))
      rec.val_loss = trainer.evaluate(*val_batches, f.eval_batches);
    std::string val_str;
    if (rec.val_loss) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "  val %.4f", *rec.val_loss);
      val_str = buf;
    }
    if (trainer.loss_scaler()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "  scale %g%s", st.loss_scale,
                    st.skipped ? " (overflow: step skipped)" : "");
      val_str += buf;
    }
    if (leader)
      std::fprintf(
          stderr, "step %lld/%lld  loss %.4f%s  lr %.2e  norm %.3f  %.0f tok/s  eta %s\n",
          static_cast<long long>(st.step), static_cast<long long>(s.steps), st.loss,
          val_str.c_str(), st.lr, st.grad_norm, rec.tokens_per_s,
          eta_string(secs / static_cast<double>(done_here) * static_cast<double>(s.steps - st.step))
              .c_str());
    history.push_back(rec);
    if (metrics)
      if (Status ms = metrics->append(rec); !ms) return fail(cmd, ms.message());
    if (!f.ckpt_dir.empty() && (last || (f.ckpt_interval > 0 && st.step % f.ckpt_interval == 0)))
      if (Status cs = save(st.step); !cs) return fail(cmd, cs.message());
  }
  if (first_step == s.steps && !f.ckpt_dir.empty() && leader)
    std::fprintf(stderr, "train: the checkpoint is at the final step; nothing to train\n");
  if (Status ps = profiling.finish(); !ps) return fail(cmd, ps.message());

  if (world > 1) {
    // Each rank's peak memory of the training itself (before the export below).
    const std::string per_rank = dist::peak_rss_by_rank(comm);
    if (leader)
      std::fprintf(stderr,
                   "train: %s: %.2f s inside MPI, %.2f s waited for it (%s); peak RSS by "
                   "rank: %s\n",
                   tp.on() ? tp.training->kind() : "data parallel", comm.comm_seconds(),
                   comm.blocked_seconds(),
                   tp.tp > 1   ? "each block waits for its sums"
                   : tp.pp > 1 ? "stages wait for their neighbours"
                               : "the rest overlapped backward",
                   per_rank.c_str());
  }
  if (!f.plot.empty() && leader) {
    if (metrics) {  // the whole run, resumes included
      metrics.reset();
      auto all = train::read_metrics(f.metrics);
      if (all) history = std::move(all).value();
    }
    if (Status ps = plot::write_loss_plot(history, f.plot, "nexus train: loss"); !ps)
      return fail(cmd, ps.message());
  }
  if (!f.out.empty() && tp.on()) {
    // The slices gathered into a full model on rank 0, which writes it.
    trainer_owner.reset();
    r.optimizer.reset();
    std::unique_ptr<train::TrainModel> full;
    if (leader) {
      auto fm = staging_model(s.model, zero_init());
      if (!fm) return fail(cmd, fm.status().message());
      full = std::move(fm).value();
    }
    tp.training->gather(m.params(), full ? full->params() : std::span<float>());
    if (!leader) return 0;
    const Status st = full->export_gguf(f.out, r.tokenizer_gguf.get());
    if (!st) return fail(cmd, st.message());
    std::printf("wrote %s\n", f.out.c_str());
    return 0;
  }
  if (!f.out.empty() && leader) {
    // The optimizer's state (AdamW: twice the model) is not needed to write the model: give it
    // back first, so that the export's tokenizer keys and buffers never raise the run's peak
    // (GPT-2 124M updating in backward: 11 MiB over the training peak before).
    trainer_owner.reset();
    r.optimizer.reset();
    const Status st = m.export_gguf(f.out, r.tokenizer_gguf.get());
    if (!st) return fail(cmd, st.message());
    std::printf("wrote %s\n", f.out.c_str());
  }
  return 0;
}

int train_main(int argc, char** argv) { return train_command(argc, argv, "train"); }

// `nexus distill --teacher T.gguf (--student S.gguf | --shape ...) --data D`: `nexus train` with
// the teacher's soft targets; --student is --init.
int distill_main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  bool teacher = false, help = false;
  for (std::string& a : args) {
    if (a == "--student") a = "--init";
    if (a.rfind("--student=", 0) == 0) a = "--init=" + a.substr(10);
    teacher = teacher || a == "--teacher" || a.rfind("--teacher=", 0) == 0;
    help = help || a == "-h" || a == "--help";
  }
  if (!teacher && !help)
    return fail("distill", "--teacher is required (nexus distill --teacher T.gguf --student "
                           "S.gguf --data DATA.bin -o OUT.gguf)",
                kUsageError);
  std::vector<char*> ptrs;
  for (std::string& a : args) ptrs.push_back(a.data());
  return train_command(static_cast<int>(ptrs.size()), ptrs.data(), "distill");
}

Register reg({"train", "train or fine-tune a llama, qwen2, qwen3 or gpt2 model (CPU)", train_main});
Register reg_distill({"distill",
                      "train a student on a teacher's softened outputs (knowledge distillation)",
                      distill_main});

}  // namespace
}  // namespace nexus::cli
