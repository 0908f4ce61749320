// `nexus run`: load a GGUF model and generate text, streaming it to stdout; statistics to stderr.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <random>
#include <thread>

#include "command.h"
#include "nexus/context.h"
#include "nexus/core/allocator.h"
#include "nexus/io/mapped_file.h"
#include "nexus/model.h"
#include "nexus/profile.h"
#include "nexus/runtime/generator.h"
#include "nexus/runtime/memory_stats.h"
#include "nexus/tokenizer.h"
#include "tensor_parallel_cli.h"

namespace nexus::cli {
namespace {

int run_main(int argc, char** argv) {
  CLI::App app{"Generate text with a GGUF model", "nexus run"};
  std::string model_path, prompt, prompt_file, kv_type = "f16";
  int64_t n_predict = 256, n_ctx = 0, n_batch = 512;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int64_t seed = -1;
  GenerateOptions g;
  bool no_bos = false;
  app.add_option("-m,--model", model_path, "GGUF model file")->required();
  app.add_option("-p,--prompt", prompt, "prompt text (empty: start from BOS)");
  app.add_option("-f,--file", prompt_file, "read the prompt from a file (exact bytes)");
  app.add_option("-n,--n-predict", n_predict,
                 "tokens to generate, -1: no limit (stops earlier at end of text or context end)")
      ->capture_default_str();
  app.add_option("--temp", g.sampler.temperature, "temperature (0: greedy)")->capture_default_str();
  app.add_option("--top-k", g.sampler.top_k, "top-k (0: off)")->capture_default_str();
  app.add_option("--top-p", g.sampler.top_p, "top-p (1: off)")->capture_default_str();
  app.add_option("--min-p", g.sampler.min_p, "min-p (0: off)")->capture_default_str();
  app.add_option("--repeat-penalty", g.sampler.repeat_penalty, "repetition penalty (1: off)")
      ->capture_default_str();
  app.add_option("--repeat-last-n", g.sampler.repeat_last_n, "tokens the penalties look back at")
      ->capture_default_str();
  app.add_option("--frequency-penalty", g.sampler.frequency_penalty, "frequency penalty")
      ->capture_default_str();
  app.add_option("--presence-penalty", g.sampler.presence_penalty, "presence penalty")
      ->capture_default_str();
  app.add_option("-s,--seed", seed, "RNG seed (-1: random; printed with the statistics)")
      ->capture_default_str();
  app.add_option("-t,--threads", threads, "threads")->capture_default_str();
  app.add_option("-c,--ctx-size", n_ctx,
                 "context size (0: the model's, at most 4096; nexus-ltm: 4096)")
      ->capture_default_str();
  app.add_option("-b,--batch-size", n_batch, "prompt tokens per forward pass")->capture_default_str();
  app.add_option("--kv-type", kv_type, "KV cache type: f16, f32 or q8_0")->capture_default_str();
  int64_t kv_block = 0;
  app.add_option("--kv-block", kv_block, "KV cache block size in positions (0: the context size)")
      ->capture_default_str();
  std::string device = "cpu";
  app.add_option("--device", device, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--stop", g.stop, "stop string (repeatable)");
  std::string draft_path;
  app.add_option("--draft", draft_path,
                 "draft model for speculative decoding (same vocabulary; the same output)");
  app.add_option("--draft-max", g.draft_max, "draft tokens proposed per step")
      ->capture_default_str();
  app.add_option("--lookup-ngram", g.lookup_ngram,
                 "speculative decoding by prompt lookup: n-gram length (0: off; same output)")
      ->capture_default_str();
  app.add_option("--lookup-max", g.lookup_max, "most draft tokens verified per step")
      ->capture_default_str();
  app.add_flag("--ignore-eos", g.ignore_eos, "keep generating after end-of-text tokens");
  app.add_flag("--no-bos", no_bos, "do not prepend BOS to the prompt");
  bool show_memory = false;
  app.add_flag("--memory-stats", show_memory,
               "nexus-ltm: print the long-term memory's use per layer after generating");
  int tp_size = 1;
  app.add_option("--tp", tp_size,
                 "tensor parallel over this many ranks (under mpirun -np N): each holds its "
                 "share of every block's heads and feed-forward width")
      ->capture_default_str();
  profile::SessionOptions prof;
  app.add_option("--profile", prof.trace_path, "write a Chrome/Perfetto trace JSON here");
  app.add_flag("--profile-summary", prof.print_summary, "print the op time table to stderr");
  if (auto code = parse_args(app, argc, argv, "run")) return *code;
  if (!prompt.empty() && !prompt_file.empty()) return fail("run", "give -p or -f, not both");
  if (!prompt_file.empty()) {
    auto r = read_file(prompt_file);
    if (!r) return fail("run", r.status().message());
    prompt = std::move(r).value();
  }
  if (n_predict < -1)
    return fail("run", "-n must be >= 0, or -1 (until the end of text or of the context), got " +
                           std::to_string(n_predict));
  if (threads < 1) return fail("run", "-t must be >= 1, got " + std::to_string(threads));
  if (g.lookup_ngram < 0 || g.lookup_max < 1 || g.draft_max < 1)
    return fail("run", "--lookup-ngram must be >= 0, --lookup-max and --draft-max >= 1",
                kUsageError);
  if (n_ctx < 0) return fail("run", "-c must be >= 0, got " + std::to_string(n_ctx));
  if (n_batch < 1) return fail("run", "-b must be >= 1, got " + std::to_string(n_batch));
  const auto kv = kv_cache_type(kv_type);
  if (!kv) return fail("run", "--kv-type must be f16, f32 or q8_0, got '" + kv_type + "'");
  Result<Device> dev = parse_device(device);
  if (!dev) return fail("run", "--device: " + dev.status().message());
  auto started = start_tensor_parallel(tp_size);
  if (!started) return fail("run", started.status().message(), kUsageError);
  const TpRun& tp = started.value();
  if (!tp.leader()) prof = {};  // one trace and one table: rank 0's
  if (tp.size() > 1 && dev->type != DeviceType::kCpu)
    return tp.fail("run", "--tp runs on the CPU only");
  g.sampler.seed = seed < 0 ? std::random_device{}() : static_cast<uint64_t>(seed);
  // Every rank must sample the same tokens: rank 0's seed.
  if (tp.comm) tp.comm->broadcast(&g.sampler.seed, sizeof g.sampler.seed, 0);
  g.n_predict = n_predict;
  g.n_batch = n_batch;
  g.add_bos = !no_bos;

  auto model = tp.group ? Model::load(model_path, tp.group.get()) : Model::load(model_path);
  if (!model) return tp.fail("run", model.status().message());
  auto tok = Tokenizer::from_gguf((*model)->gguf());
  if (!tok) return tp.fail("run", tok.status().message());
  ContextOptions co;
  // (nexus-ltm's cache and memory do not grow with the context: 4096 however short it trained.)
  const ModelConfig& mcfg = (*model)->config();
  co.n_ctx = n_ctx > 0                 ? n_ctx
             : mcfg.memory_segment > 0 ? 4096
                                       : std::min<int64_t>(mcfg.n_ctx_train, 4096);
  co.kv_type = *kv;
  co.n_threads = threads;
  co.max_batch = n_batch;
  co.device = *dev;
  co.kv_block = kv_block;
  auto ctx = Context::create(**model, co);
  if (!ctx) return tp.fail("run", ctx.status().message());
  std::unique_ptr<Model> draft_model;
  std::unique_ptr<Context> draft_ctx;
  if (!draft_path.empty()) {
    auto dm = Model::load(draft_path);
    if (!dm) return tp.fail("run", "--draft: " + dm.status().message());
    if ((*dm)->config().n_vocab != (*model)->config().n_vocab)
      return tp.fail("run", "--draft: its vocabulary has " +
                                std::to_string((*dm)->config().n_vocab) + " tokens, the model's " +
                                std::to_string((*model)->config().n_vocab));
    draft_model = std::move(dm).value();
    ContextOptions dco = co;
    dco.kv_block = 0;
    // A draft is small: its steps are too short to pay for waking workers, whose spinning would
    // also take the cores from the model's own pool.
    dco.n_threads = 1;
    auto dc = Context::create(*draft_model, dco);
    if (!dc) return tp.fail("run", "--draft: " + dc.status().message());
    draft_ctx = std::move(dc).value();
    g.draft = draft_ctx.get();
  }

  const bool leader = tp.leader();  // the other ranks compute the same tokens silently
  if (leader) {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
  }
  profile::Session profiling(prof);
  // From BOS, SentencePiece's first piece carries the word-start space; drop it as llama.cpp does.
  bool at_start = prompt.empty();
  auto stats = generate(**ctx, **tok, prompt, g, [&at_start, leader](std::string_view text) {
    if (at_start && !text.empty() && text[0] == ' ') text.remove_prefix(1);
    at_start = false;
    if (!leader) return true;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  if (leader) std::printf("\n");
  std::fflush(stdout);
  if (!stats) return tp.fail("run", stats.status().message());
  if (Status st = profiling.finish(); !st) return tp.fail("run", st.message());
  const GenerateStats& s = stats.value();
  if (tp.size() > 1) {
    // Each rank's weights and KV cache: its slice.
    const std::string per_rank = dist::peak_rss_by_rank(*tp.comm);
    if (leader)
      std::fprintf(stderr, "\ntensor parallel over %d ranks (%s, %s); peak RSS by rank: %s",
                   tp.size(), tp.comm->name(), tp.comm->transport().c_str(), per_rank.c_str());
  }
  if (!leader) return 0;
  const MemStats m = mem_stats();
  std::fprintf(stderr,
               "\nprompt: %lld tokens, %.1f tokens/s | generated: %lld tokens, %.1f tokens/s | "
               "stop: %s | seed: %llu | threads: %d\n"
               "memory: peak RSS %.1f MiB (weights %.1f MiB, KV cache %.1f MiB, "
               "activations+scratch %.1f MiB)\n",
               static_cast<long long>(s.n_prompt),
               s.prefill_seconds > 0 ? s.n_prompt / s.prefill_seconds : 0.0,
               static_cast<long long>(s.n_generated),
               s.decode_seconds > 0 ? s.n_generated / s.decode_seconds : 0.0,
               s.stop_reason.c_str(), static_cast<unsigned long long>(g.sampler.seed), threads,
               peak_rss_bytes() / 1048576.0, (*model)->loaded_weight_bytes() / 1048576.0,
               (*ctx)->kv_bytes() / 1048576.0,
               (m.peak[static_cast<int>(MemCategory::kActivations)] +
                m.peak[static_cast<int>(MemCategory::kScratch)]) / 1048576.0);
  if (show_memory) {
    const ModelConfig& mc = (*model)->config();
    if (mc.memory_segment == 0)
      std::fprintf(stderr, "--memory-stats: %s has no long-term memory\n", mc.arch_name.c_str());
    else
      std::fprintf(stderr, "%s", format_memory_stats(memory_stats(**ctx, 0), mc).c_str());
  }
  if (g.lookup_ngram > 0 || g.draft)
    std::fprintf(stderr, "speculation: %lld of %lld drafts accepted, %lld decode calls\n",
                 static_cast<long long>(s.accepted), static_cast<long long>(s.drafted),
                 static_cast<long long>(s.decode_calls));
  return 0;
}

Register reg({"run", "generate text with a GGUF model", run_main});

}  // namespace
}  // namespace nexus::cli
