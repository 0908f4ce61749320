// The serving engine: many generation requests in flight on one model, run by continuous batching.
// One thread owns a Context with a sequence slot per running request; each step is one forward
// pass over every running sequence, its next token for those decoding and a chunk of its prompt
// for those prefilling, under a per-step token budget (chunked prefill: a long prompt never stalls
// the others). New requests join at the next step and finished ones leave. The KV cache is paged
// (blocks from one pool); when the pool runs out the newest sequence is preempted (its blocks
// freed, its tokens recomputed once blocks are free again). A request that begins with tokens a
// running or recently finished sequence holds starts from that one's KV blocks, shared (the
// prefix cache); a recurrent model's sequences keep snapshots of their state for the same use.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nexus/context.h"
#include "nexus/dtype.h"
#include "nexus/model.h"
#include "nexus/runtime/memory_stats.h"
#include "nexus/runtime/sampler.h"
#include "nexus/status.h"
#include "nexus/tokenizer.h"

namespace nexus::serve {

struct EngineOptions {
  int max_seqs = 8;                 // sequences decoded together
  int64_t max_batch_tokens = 512;   // tokens per forward pass (decode tokens + prefill chunks)
  int64_t prefill_chunk = 128;      // prompt tokens per pass while other requests decode
  int64_t n_ctx = 0;                // positions per sequence (0: the model's, at most 4096)
  int64_t kv_block = 16;            // KV cache block size in positions
  int64_t kv_memory = 0;            // bytes of the KV block pool (0: max_seqs full contexts)
  DType kv_type = DType::kF16;
  int n_threads = 1;
  int max_queue = 256;              // waiting requests beyond which submit() refuses
  // Finished sequences whose KV blocks are kept for requests that begin with the same tokens
  // (0: no prefix cache). They give way (least recently used first) to running sequences.
  int prefix_cache = 8;
  // Speculative decoding by prompt lookup: when a decoding sequence's last lookup_ngram tokens
  // occurred earlier in its prompt or output, the tokens that followed (up to lookup_max) are
  // verified in the same forward pass; the output is the same as without (0: off).
  int lookup_ngram = 0;
  int lookup_max = 8;
  // Speculative decoding with a draft model (same vocabulary; it must outlive the engine): it
  // proposes draft_max tokens greedily for each decoding sequence, verified like prompt lookup's
  // drafts (the output is the same as without). Takes precedence over lookup_ngram.
  const Model* draft_model = nullptr;
  int draft_max = 4;
  // Models with recurrent state (mamba, hybrids), whose state cannot be shared short of its
  // latest position: a sequence's state is saved every state_interval positions (its prompt
  // chunks end there), up to state_snapshots per sequence (past that every other one is dropped
  // and the interval doubles). A request that shares part of a cached or running sequence's
  // tokens starts from the latest snapshot within them (0: whole states only, as when a request
  // continues a finished one).
  int state_snapshots = 8;
  int64_t state_interval = 128;     // a multiple of kv_block
};

struct GenRequest {
  std::vector<int32_t> prompt;      // token ids: at least one, fewer than n_ctx
  SamplerParams sampler;
  int64_t max_tokens = 16;          // tokens to generate; -1: until the end of text or context
  std::vector<std::string> stop;    // stop strings (not emitted)
  bool ignore_eos = false;
  int top_logprobs = -1;            // -1: no log-probabilities; 0-20: the chosen token's and
                                    // this many of the most likely tokens' at each step
};

struct TokenLogprob {
  int32_t id;
  float logprob;
};

// What a request's stream delivers, in order: token events, then one finish event.
struct Event {
  enum class Kind { kToken, kFinish } kind = Kind::kToken;
  // kToken: the generated token, the text now safe to show (it may be empty while a stop string
  // or a UTF-8 character is incomplete) and, when asked for, log-probabilities of the raw logits.
  int32_t token = -1;
  std::string text;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
  // kFinish: "stop" (end of text or a stop string), "length" (max_tokens or the context end),
  // "cancelled" or "error" (with `error`); text holds what was still held back.
  std::string finish_reason;
  std::string error;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// The receiving end of one request; thread-safe.
class Stream {
 public:
  // Waits up to `timeout` for the next event; false when none came.
  bool next(Event* out, std::chrono::milliseconds timeout);
  // Asks the engine to stop the request; a finish event with "cancelled" follows.
  void cancel();
  bool cancelled() const;

  // The engine's side.
  void push(Event e);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  bool cancelled_ = false;
};

// Counters and gauges for /metrics; the histograms hold seconds.
struct Histogram {
  std::vector<double> bounds;       // upper bounds, ascending; +Inf is implied
  std::vector<uint64_t> counts;     // per bound (not cumulative), plus one for +Inf
  double sum = 0.0;
  uint64_t count = 0;
  void observe(double v);
};

struct EngineStats {
  int64_t queue_depth = 0;
  int64_t running = 0;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  uint64_t prompt_tokens = 0, generated_tokens = 0;
  uint64_t preemptions = 0, steps = 0;
  uint64_t prefix_lookups = 0, prefix_hits = 0, prefix_tokens = 0;  // prefix cache
  uint64_t state_restores = 0;       // prefix hits that started from a recurrent-state snapshot
  int64_t state_snapshot_bytes = 0;  // held by running and cached sequences
  uint64_t spec_drafted = 0, spec_accepted = 0;                     // speculative decoding
  uint64_t finished_stop = 0, finished_length = 0, finished_cancelled = 0, finished_error = 0;
  Histogram ttft, inter_token, e2e;
  // nexus-ltm: each layer's long-term memory use, the mean over the running sequences of the
  // latest step that had any.
  std::vector<LayerMemoryStats> memory;
};

// Why submit() refused a request.
enum class Refusal { kNone, kInvalid, kBusy, kShutdown };

class Engine {
 public:
  // The model and tokenizer must outlive the engine. Starts the engine's thread.
  static Result<std::unique_ptr<Engine>> create(const Model& model, const Tokenizer& tok,
                                                const EngineOptions& opts);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. On refusal `*why` says which kind and `*message` names the problem.
  std::shared_ptr<Stream> submit(GenRequest req, Refusal* why, std::string* message);
  // The embedding of a token sequence: the mean over its tokens of the final-norm hidden states,
  // L2-normalised (dim floats). Runs on the engine's thread between steps; blocks until done.
  // Errors name the problem (empty, too long, out of the vocabulary, shutting down).
  Result<std::vector<float>> embed(std::vector<int32_t> tokens);
  // Stops taking requests; lets running and queued ones finish until `deadline`, then cancels
  // what remains; returns once the engine's thread is idle. Idempotent.
  void drain(std::chrono::steady_clock::time_point deadline);
  EngineStats stats() const;
  int64_t n_ctx() const;
  const EngineOptions& options() const;
  const Tokenizer& tokenizer() const;
  const Model& model() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nexus::serve
