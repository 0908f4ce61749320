// The continuous-batching loop (serve/engine.h): admission, one batched forward per step, sampling,
// stop conditions, preemption when the KV pool runs out.
#include "nexus/serve/engine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <span>
#include <thread>
#include <unordered_set>

#include "nexus/runtime/embedding.h"
#include "nexus/runtime/generator.h"
#include "runtime/lookup.h"
#include "runtime/stop.h"

namespace nexus::serve {

using Clock = std::chrono::steady_clock;

bool Stream::next(Event* out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  *out = std::move(events_.front());
  events_.pop_front();
  return true;
}

void Stream::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
}

bool Stream::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

void Stream::push(Event e) {
  {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i];
  sum += v;
  ++count;
}

namespace {

Histogram latency_histogram() {
  Histogram h;
  h.bounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  h.counts.assign(h.bounds.size() + 1, 0);
  return h;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

struct Engine::Impl {
  // Snapshots of a sequence's recurrent state, ascending by position; shared by the sequences
  // that started from its prefix.
  using Snapshots = std::vector<std::shared_ptr<const RecurrentSnapshot>>;
  struct Seq {
    std::shared_ptr<Stream> stream;
    GenRequest req;
    int slot = -1;
    std::vector<int32_t> tokens;  // prompt + generated; the last one is fed next
    int64_t n_cached = 0;         // tokens[0, n_cached) are in the KV cache
    int64_t n_prompt = 0;
    int64_t n_generated = 0;
    std::unique_ptr<Sampler> sampler;
    StopMatcher stop;
    Clock::time_point t_submit, t_last;
    uint64_t order = 0;
    bool prefix_tried = false;  // looked for a cached prefix since it last had nothing cached
    int64_t d_cached = 0;       // tokens[0, d_cached) are in the draft model's KV cache
    std::vector<int32_t> draft;  // the draft model's proposal for this step
    Snapshots snaps;             // recurrent models: its state at multiples of snap_every
    int64_t snap_every = 0;
  };
  // A finished sequence's slot kept with its KV blocks for later requests that start with the
  // same tokens (the prefix cache), evicted least recently used.
  struct Parked {
    int slot;
    std::vector<int32_t> tokens;  // what its KV cache holds
    uint64_t last_used;
    Snapshots snaps;
    int64_t snap_every;
  };

  const Model& model;
  const Tokenizer& tok;
  EngineOptions opts;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Context> dctx;  // the draft model's, slot for slot
  int64_t n_ctx = 0;
  int64_t n_vocab = 0;

  mutable std::mutex mu;  // guards queue, accepting, stop, deadline, stats
  std::condition_variable cv;
  std::deque<std::unique_ptr<Seq>> queue;
  struct EmbedJob {
    std::vector<int32_t> tokens;
    std::promise<Result<std::vector<float>>> done;
  };
  std::deque<std::unique_ptr<EmbedJob>> embed_queue;
  bool accepting = true;
  bool stop = false;
  Clock::time_point deadline = Clock::time_point::max();
  EngineStats stats;

  // The engine thread's own state.
  std::vector<std::unique_ptr<Seq>> running;
  std::vector<bool> slot_used;  // max_seqs + prefix_cache slots
  std::vector<Parked> parked;
  uint64_t next_order = 0, use_clock = 0;
  std::thread thread;

  Impl(const Model& m, const Tokenizer& t, const EngineOptions& o) : model(m), tok(t), opts(o) {}

  // The snapshot interval a new sequence starts with (0: no snapshots).
  int64_t snap_interval() const {
    return model.config().has_recurrent() && opts.state_snapshots > 0 ? opts.state_interval : 0;
  }

  int64_t blocks_for(int64_t positions) const {
    return (positions + opts.kv_block - 1) / opts.kv_block;
  }

  void finish(Seq& s, const std::string& reason, const std::string& error = {}) {
    Event e;
    e.kind = Event::Kind::kFinish;
    e.finish_reason = reason;
    e.error = error;
    if (reason == "length" || (reason == "stop" && !s.stop.stopped())) e.text = s.stop.flush().text;
    e.prompt_tokens = s.n_prompt;
    e.completion_tokens = s.n_generated;
    if (s.slot >= 0 && dctx) dctx->clear_seq(s.slot);
    if (s.slot >= 0) {
      if ((reason == "stop" || reason == "length") && opts.prefix_cache > 0 &&
          s.n_cached >= opts.kv_block) {
        if (static_cast<int>(parked.size()) >= opts.prefix_cache) evict_lru();
        parked.push_back({s.slot, std::vector<int32_t>(s.tokens.begin(), s.tokens.begin() + s.n_cached),
                          ++use_clock, std::move(s.snaps), s.snap_every});
      } else {
        ctx->clear_seq(s.slot);
        slot_used[s.slot] = false;
      }
      s.slot = -1;
    }
    {
      std::lock_guard lock(mu);
      stats.e2e.observe(seconds(Clock::now() - s.t_submit));
      if (reason == "stop") ++stats.finished_stop;
      else if (reason == "length") ++stats.finished_length;
      else if (reason == "cancelled") ++stats.finished_cancelled;
      else ++stats.finished_error;
    }
    s.stream->push(std::move(e));
  }

  // Drops the least recently used cached prefix; false when there is none.
  bool evict_lru() {
    if (parked.empty()) return false;
    auto it = std::min_element(parked.begin(), parked.end(), [](const Parked& a, const Parked& b) {
      return a.last_used < b.last_used;
    });
    ctx->clear_seq(it->slot);
    slot_used[it->slot] = false;
    parked.erase(it);
    return true;
  }

  // A sequence with nothing cached starts from the longest prefix of its tokens that a cached
  // (parked) or running sequence holds, sharing that one's full KV blocks (and copying a partial
  // last one). At least one token is left to compute, for the logits. A recurrent state is shared
  // whole (the source's every token is a prefix) or from the source's latest snapshot within the
  // common prefix.
  void reuse_prefix(Seq& s) {
    s.prefix_tried = true;
    const bool recurrent = model.config().has_recurrent();
    const int64_t cap = static_cast<int64_t>(s.tokens.size()) - 1;
    int src = -1;
    int64_t best = 0;
    Parked* best_parked = nullptr;
    const Snapshots* best_snaps = nullptr;
    const RecurrentSnapshot* best_snap = nullptr;
    int64_t best_every = 0;
    auto consider = [&](int slot, const int32_t* t, int64_t n, const Snapshots& snaps,
                        int64_t every) {
      int64_t l = 0;
      const int64_t lim = std::min(n, cap);
      while (l < lim && t[l] == s.tokens[l]) ++l;
      const RecurrentSnapshot* snap = nullptr;
      if (recurrent && l < n) {  // short of the source's state: its latest snapshot within l
        for (const auto& p : snaps)
          if (p->pos <= l) snap = p.get();
        l = snap ? snap->pos : 0;
      }
      if (l <= best) return false;
      best = l;
      src = slot;
      best_snaps = &snaps;
      best_snap = snap;
      best_every = every;
      return true;
    };
    for (Parked& p : parked)
      if (consider(p.slot, p.tokens.data(), static_cast<int64_t>(p.tokens.size()), p.snaps,
                   p.snap_every))
        best_parked = &p;
    for (auto& r : running)
      if (r.get() != &s && r->n_cached > 0 &&
          consider(r->slot, r->tokens.data(), r->n_cached, r->snaps, r->snap_every))
        best_parked = nullptr;
    {
      std::lock_guard lock(mu);
      ++stats.prefix_lookups;
    }
    if (best < opts.kv_block) return;
    int64_t n = best;
    if (best_snap) {
      if (!ctx->share_prefix(src, s.slot, *best_snap)) return;
    } else if (!ctx->share_prefix(src, s.slot, static_cast<int32_t>(n))) {
      n = best / opts.kv_block * opts.kv_block;  // full blocks only: no block to copy into
      if (!ctx->share_prefix(src, s.slot, static_cast<int32_t>(n))) return;
    }
    s.n_cached = n;
    if (recurrent) {  // the source's snapshots within the shared prefix are this one's too
      s.snaps.clear();
      for (const auto& p : *best_snaps)
        if (p->pos <= n) s.snaps.push_back(p);
      s.snap_every = std::max(s.snap_every, best_every);
    }
    if (best_parked) best_parked->last_used = ++use_clock;
    std::lock_guard lock(mu);
    ++stats.prefix_hits;
    stats.prefix_tokens += static_cast<uint64_t>(n);
    if (best_snap) ++stats.state_restores;
  }

  // True when a running sequence is computing, right now, a prompt prefix that `s` shares and that
  // has at least a KV block still to compute: `s` then waits for it rather than compute the same
  // tokens beside it (a burst of requests with one system prompt computes it once).
  // `now`: the sequences whose prompt chunks this step has taken so far.
  bool prefix_in_flight(const Seq& s, const std::vector<const Seq*>& now) const {
    const int64_t cap = static_cast<int64_t>(s.tokens.size()) - 1;
    for (const auto& r : running) {
      const bool prefilling = (r->n_cached > 0 &&
                               static_cast<int64_t>(r->tokens.size()) - r->n_cached > 1) ||
                              std::find(now.begin(), now.end(), r.get()) != now.end();
      if (r.get() == &s || !prefilling) continue;
      const int64_t lim = std::min(r->n_prompt, cap);
      int64_t l = 0;
      while (l < lim && r->tokens[l] == s.tokens[l]) ++l;
      if (l - r->n_cached >= opts.kv_block) return true;
    }
    return false;
  }

  // Recurrent models: the state of a sequence whose cached positions reached a multiple of its
  // snapshot interval is saved; past state_snapshots, every other snapshot goes.
  void snapshot(Seq& s) {
    if (s.snap_every <= 0 || s.n_cached % s.snap_every != 0) return;
    if (!s.snaps.empty() && s.snaps.back()->pos >= s.n_cached) return;
    auto snap = std::make_shared<RecurrentSnapshot>();
    if (!ctx->save_state(s.slot, snap.get())) return;
    s.snaps.push_back(std::move(snap));
    if (static_cast<int>(s.snaps.size()) <= opts.state_snapshots) return;
    s.snap_every *= 2;
    std::erase_if(s.snaps, [&](const auto& p) { return p->pos % s.snap_every != 0; });
  }

  void remove_finished() {
    running.erase(std::remove_if(running.begin(), running.end(),
                                 [](const std::unique_ptr<Seq>& s) { return s->slot < 0; }),
                  running.end());
  }

  // Log-probabilities of the raw logits: the chosen token's and the top n.
  void logprobs(std::span<const float> row, Event& e, int top_n) const {
    float mx = -INFINITY;
    for (float v : row) mx = std::max(mx, v);
    double sum = 0.0;
    for (float v : row) sum += std::exp(static_cast<double>(v - mx));
    const float lse = mx + static_cast<float>(std::log(sum));
    e.logprob = row[e.token] - lse;
    if (top_n <= 0) return;
    std::vector<int32_t> ids(row.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    const auto k = static_cast<size_t>(std::min<int64_t>(top_n, static_cast<int64_t>(ids.size())));
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (size_t i = 0; i < k; ++i) e.top.push_back({ids[i], row[ids[i]] - lse});
  }

  // The sequence's logits row: sample and stream the token; returns the reason to finish ("stop",
  // "length") when a stop condition holds, else "" (the token is appended to s.tokens).
  std::string on_logits(Seq& s, std::span<const float> row, int32_t* token) {
    Event e;
    e.token = s.sampler->sample(row);
    *token = e.token;
    s.sampler->accept(e.token);
    if (!s.req.ignore_eos && tok.is_eog(e.token)) return "stop";
    if (s.req.top_logprobs >= 0) logprobs(row, e, s.req.top_logprobs);
    ++s.n_generated;
    s.tokens.push_back(e.token);
    const Clock::time_point now = Clock::now();
    {
      std::lock_guard lock(mu);
      ++stats.generated_tokens;
      if (s.n_generated == 1)
        stats.ttft.observe(seconds(now - s.t_submit));
      else
        stats.inter_token.observe(seconds(now - s.t_last));
    }
    s.t_last = now;
    const StopResult r = s.stop.feed(tok.token_to_piece(e.token));
    e.text = std::string(r.text);
    s.stream->push(std::move(e));
    if (r.stopped) return "stop";
    if (s.req.max_tokens >= 0 && s.n_generated >= s.req.max_tokens) return "length";
    if (static_cast<int64_t>(s.tokens.size()) - 1 >= n_ctx) return "length";
    return "";
  }

  void admit() {
    std::lock_guard lock(mu);
    while (!queue.empty() && static_cast<int>(running.size()) < opts.max_seqs) {
      auto it = std::find(slot_used.begin(), slot_used.end(), false);
      if (it == slot_used.end()) {
        if (!evict_lru()) break;
        it = std::find(slot_used.begin(), slot_used.end(), false);
      }
      std::unique_ptr<Seq> s = std::move(queue.front());
      queue.pop_front();
      s->slot = static_cast<int>(it - slot_used.begin());
      *it = true;
      s->order = next_order++;
      running.push_back(std::move(s));
    }
  }

  // Embedding jobs, each alone in its own forward passes through a free slot (cached prefixes
  // give theirs up); they wait while every slot is generating.
  void run_embeddings() {
    for (;;) {
      std::unique_ptr<EmbedJob> job;
      {
        std::lock_guard lock(mu);
        if (embed_queue.empty()) return;
        const bool slot = std::find(slot_used.begin(), slot_used.end(), false) != slot_used.end();
        if (!slot && parked.empty()) return;  // every slot generating: wait for one
        job = std::move(embed_queue.front());
        embed_queue.pop_front();
      }
      auto it = std::find(slot_used.begin(), slot_used.end(), false);
      if (it == slot_used.end()) {
        evict_lru();
        it = std::find(slot_used.begin(), slot_used.end(), false);
      }
      const int slot = static_cast<int>(it - slot_used.begin());
      job->done.set_value(embed_tokens(*ctx, slot, job->tokens, opts.max_batch_tokens));
    }
  }

  // The draft model's proposals for the decoding sequences: each catches up on the tokens it has
  // not seen (its last one asks for logits), then draft_max greedy tokens, one batched pass per
  // token for all of them. A sequence whose draft pass fails gets no draft this step.
  void propose(const std::vector<Seq*>& seqs) {
    std::vector<Seq*> live;
    Batch batch;
    for (Seq* s : seqs) {
      s->draft.clear();
      const int64_t room = std::min<int64_t>(
          {static_cast<int64_t>(opts.draft_max), n_ctx - 1 - s->n_cached,
           s->req.max_tokens >= 0 ? s->req.max_tokens - s->n_generated - 1 : INT64_MAX});
      if (room <= 0) continue;
      const int64_t size = static_cast<int64_t>(s->tokens.size());
      if (size - s->d_cached > opts.max_batch_tokens / 2) {
        // Far behind (a long prompt, a shared prefix): catch up a chunk now, draft at a later step.
        Batch chunk;
        const int64_t end = s->d_cached + opts.max_batch_tokens / 2;
        for (int64_t p = s->d_cached; p < end; ++p)
          chunk.add(s->tokens[p], static_cast<int32_t>(p), s->slot, p + 1 == end);
        std::vector<float> ignored;
        if (dctx->decode(chunk, &ignored)) {
          s->d_cached = end;
        } else {
          dctx->clear_seq(s->slot);
          s->d_cached = 0;
        }
        continue;
      }
      if (static_cast<int64_t>(batch.size()) + size - s->d_cached > opts.max_batch_tokens)
        continue;  // this pass is full: its turn comes when the others have caught up
      for (int64_t p = s->d_cached; p < size; ++p)
        batch.add(s->tokens[p], static_cast<int32_t>(p), s->slot, p + 1 == size);
      live.push_back(s);
    }
    if (live.empty()) return;
    std::vector<float> logits;
    const int64_t nv = n_vocab;
    auto argmax = [&](size_t row) {
      const float* r = logits.data() + row * nv;
      return static_cast<int32_t>(std::max_element(r, r + nv) - r);
    };
    if (!dctx->decode(batch, &logits)) {
      for (Seq* s : live) {
        dctx->clear_seq(s->slot);
        s->d_cached = 0;
      }
      return;
    }
    for (size_t i = 0; i < live.size(); ++i) {
      live[i]->d_cached = static_cast<int64_t>(live[i]->tokens.size());
      live[i]->draft.push_back(argmax(i));
    }
    for (int k = 1; k < opts.draft_max; ++k) {
      batch.clear();
      std::vector<Seq*> more;
      for (Seq* s : live) {
        const int64_t room = std::min<int64_t>(
            n_ctx - 1 - s->n_cached,
            s->req.max_tokens >= 0 ? s->req.max_tokens - s->n_generated - 1 : INT64_MAX);
        if (static_cast<int64_t>(s->draft.size()) >= room) continue;
        batch.add(s->draft.back(), static_cast<int32_t>(s->d_cached), s->slot, true);
        more.push_back(s);
      }
      if (more.empty() || !dctx->decode(batch, &logits)) break;
      for (size_t i = 0; i < more.size(); ++i) {
        ++more[i]->d_cached;
        more[i]->draft.push_back(argmax(i));
      }
      live = more;
    }
  }

  // One step; false when there was nothing to do.
  bool step() {
    run_embeddings();
    admit();
    bool past_deadline;
    {
      std::lock_guard lock(mu);  // drain() sets the deadline from another thread
      past_deadline = Clock::now() >= deadline;
    }
    for (auto& s : running)
      if (s->stream->cancelled() || past_deadline) finish(*s, "cancelled");
    remove_finished();
    if (running.empty()) return false;

    // Decoding sequences first (one token each), then prompt chunks in admission order. A
    // sequence with nothing cached (new or preempted) starts only when the pool has the blocks
    // for all its tokens, so it is not preempted again before it gets going.
    Batch batch;
    struct Part {
      Seq* seq;
      int64_t count;
      bool want;
      std::vector<int32_t> draft;  // speculated tokens after the fed one (decoding only)
      int64_t more = 0;            // prompt tokens past a snapshot cut, run in passes of their own
    };
    std::vector<Part> parts;
    std::vector<const Seq*> prefilling_now;
    int64_t budget = opts.max_batch_tokens;
    // With requests decoding, prompts advance by at most prefill_chunk tokens a step, so that a
    // step (and so every decoding request's next token) is not held up by long prompts.
    const bool decoding = std::any_of(running.begin(), running.end(), [](const auto& s) {
      return s->n_cached > 0 && s->tokens.size() - s->n_cached == 1;
    });
    int64_t prefill_left = decoding ? opts.prefill_chunk : opts.max_batch_tokens;
    const Context::KvUsage kv = ctx->kv_usage();
    int64_t free_blocks = kv.blocks_total - kv.blocks_used;
    std::vector<Seq*> order;
    for (auto& s : running) order.push_back(s.get());
    std::stable_sort(order.begin(), order.end(), [](const Seq* a, const Seq* b) {
      const bool da = a->n_cached > 0 && a->tokens.size() - a->n_cached == 1;
      const bool db = b->n_cached > 0 && b->tokens.size() - b->n_cached == 1;
      if (da != db) return da;
      return a->order < b->order;
    });
    if (dctx) {
      std::vector<Seq*> decoding;
      for (Seq* s : order)
        if (s->n_cached > 0 && s->tokens.size() - s->n_cached == 1) decoding.push_back(s);
      propose(decoding);
    }
    for (Seq* s : order) {
      if (budget == 0) break;
      // A prompt looks for a cached prefix when it is first scheduled, so that one arriving
      // beside another with the same beginning finds what that one has computed meanwhile.
      if (opts.prefix_cache > 0 && s->n_cached == 0 && !s->prefix_tried && prefill_left > 0) {
        if (prefix_in_flight(*s, prefilling_now)) continue;  // look again next step
        reuse_prefix(*s);
      }
      const int64_t left = static_cast<int64_t>(s->tokens.size()) - s->n_cached;
      std::vector<int32_t> draft;
      if (left == 1 && s->n_cached > 0 && dctx) {
        draft = std::move(s->draft);
        if (static_cast<int64_t>(draft.size()) > budget - 1) draft.resize(std::max<int64_t>(0, budget - 1));
      } else if (left == 1 && s->n_cached > 0) {
        // Room for drafts: the step's budget, the context, and the tokens still allowed.
        int64_t room = std::min<int64_t>(budget - 1, n_ctx - 1 - s->n_cached);
        if (s->req.max_tokens >= 0) room = std::min(room, s->req.max_tokens - s->n_generated - 1);
        draft = lookup_draft(s->tokens, opts.lookup_ngram, std::min<int64_t>(room, opts.lookup_max));
      }
      const bool prefill = left > 1 || s->n_cached == 0;
      if (prefill && prefill_left <= 0) continue;
      int64_t count = !draft.empty() ? 1 + static_cast<int64_t>(draft.size())
                      : prefill      ? std::min({left, budget, prefill_left})
                                     : std::min(left, budget);
      // A chunk that passes a snapshot position stops there in this pass; the rest follows in
      // passes of its own within the step (run_past_snapshots).
      int64_t more = 0;
      if (prefill && s->snap_every > 0) {
        const int64_t cut = (s->n_cached / s->snap_every + 1) * s->snap_every - s->n_cached;
        if (cut < count) more = count - cut;
      }      if (s->n_cached == 0) {
        const int64_t need = blocks_for(static_cast<int64_t>(s->tokens.size()) + 1);
        if (need > free_blocks && evict_lru()) return true;  // cached prefixes give way first
        if (need > free_blocks) continue;
        free_blocks -= need;
      } else {
        // The blocks a growing sequence takes this step, so that a new one is not started on them.
        free_blocks -= blocks_for(s->n_cached + count) - blocks_for(s->n_cached);
      }
      if (!draft.empty()) {
        batch.add(s->tokens[s->n_cached], static_cast<int32_t>(s->n_cached), s->slot, true);
        for (size_t j = 0; j < draft.size(); ++j)
          batch.add(draft[j], static_cast<int32_t>(s->n_cached + 1 + j), s->slot, true);
        parts.push_back({s, count, true, std::move(draft)});
        budget -= count;
        continue;
      }
      if (prefill) {
        prefill_left -= count;
        prefilling_now.push_back(s);
      }
      for (int64_t i = 0; i < count - more; ++i) {
        const int64_t p = s->n_cached + i;
        batch.add(s->tokens[p], static_cast<int32_t>(p), s->slot, p + 1 == s->n_cached + left);
      }
      parts.push_back({s, count - more, count == left && more == 0, {}, more});
      budget -= count;
    }
    if (parts.empty()) {
      // Every sequence waits for blocks. If none holds any, nothing will free them: the oldest
      // cannot fit the pool at all.
      const bool any_cached =
          std::any_of(running.begin(), running.end(), [](auto& s) { return s->n_cached > 0; });
      if (!any_cached) {
        Seq* oldest = order.front();
        finish(*oldest, "error",
               "the request needs " + std::to_string(blocks_for(oldest->tokens.size() + 1)) +
                   " KV blocks of " + std::to_string(opts.kv_block) + " positions; the pool has " +
                   std::to_string(kv.blocks_total) + " (raise --kv-memory)");
        remove_finished();
      }
      return true;
    }
    std::vector<float> logits;
    const Status st = ctx->decode(batch, &logits);
    if (!st) {
      if (st.message().find("KV cache full") != std::string::npos && evict_lru()) return true;
      if (st.message().find("KV cache full") != std::string::npos) {
        // Preempt the newest sequence that holds blocks; it recomputes when blocks are free.
        Seq* victim = nullptr;
        for (auto& s : running)
          if (s->n_cached > 0 && (!victim || s->order > victim->order)) victim = s.get();
        const size_t holders = std::count_if(running.begin(), running.end(),
                                             [](auto& s) { return s->n_cached > 0; });
        if (victim && holders > 1) {
          ctx->clear_seq(victim->slot);
          victim->n_cached = 0;
          victim->prefix_tried = false;
          victim->snaps.clear();
          victim->snap_every = snap_interval();
          if (dctx) dctx->clear_seq(victim->slot);
          victim->d_cached = 0;
          std::lock_guard lock(mu);
          ++stats.preemptions;
          return true;
        }
      }
      for (const Part& p : parts) finish(*p.seq, "error", st.message());
      remove_finished();
      return true;
    }
    int64_t row = 0;
    auto row_at = [&](int64_t r) {
      return std::span<const float>(logits.data() + r * n_vocab, static_cast<size_t>(n_vocab));
    };
    for (const Part& p : parts) {
      Seq& s = *p.seq;
      if (p.draft.empty()) {
        s.n_cached += p.count;
        snapshot(s);
        if (!p.want) continue;
        int32_t token;
        const std::string reason = on_logits(s, row_at(row++), &token);
        if (!reason.empty()) finish(s, reason);
        continue;
      }
      // Verification: the rows are the logits after the fed token and after each draft. Each is
      // sampled in order, exactly as decoding one token at a time would (the same draws); a draft
      // stands while it equals the token sampled before it. The KV positions of the drafts that
      // fell are dropped.
      const int64_t fed_end = s.n_cached + p.count;
      s.n_cached += 1;
      std::string reason;
      size_t accepted = 0;
      for (size_t j = 0; j <= p.draft.size(); ++j) {
        int32_t token;
        reason = on_logits(s, row_at(row + static_cast<int64_t>(j)), &token);
        if (!reason.empty() || j == p.draft.size() || token != p.draft[j]) break;
        ++accepted;
        ++s.n_cached;
      }
      row += p.count;
      if (s.n_cached < fed_end) ctx->clear_seq(s.slot, static_cast<int32_t>(s.n_cached));
      if (dctx && s.d_cached > s.n_cached) {  // the draft's own tokens past the verified ones
        dctx->clear_seq(s.slot, static_cast<int32_t>(s.n_cached));
        s.d_cached = s.n_cached;
      }
      {
        std::lock_guard lock(mu);
        stats.spec_drafted += p.draft.size();
        stats.spec_accepted += accepted;
      }
      if (!reason.empty()) finish(s, reason);
    }
    run_past_snapshots(parts);
    remove_finished();
    std::lock_guard lock(mu);
    ++stats.steps;
    return true;
  }

  // The prompt tokens of parts whose chunk stopped at a snapshot position: a pass per snapshot
  // interval, each followed by its snapshot, the last asking for logits when it ends the prompt.
  // A pass that fails leaves the rest for the next step.
  template <typename Part>
  void run_past_snapshots(std::vector<Part>& parts) {
    std::vector<float> logits;
    for (;;) {
      Batch batch;
      std::vector<Part*> live;
      for (Part& p : parts) {
        if (p.more == 0) continue;
        Seq& s = *p.seq;
        const int64_t size = static_cast<int64_t>(s.tokens.size());
        p.count = std::min(p.more, s.snap_every - s.n_cached % s.snap_every);
        for (int64_t i = 0; i < p.count; ++i) {
          const int64_t pos = s.n_cached + i;
          batch.add(s.tokens[pos], static_cast<int32_t>(pos), s.slot, pos + 1 == size);
        }
        live.push_back(&p);
      }
      if (live.empty()) return;
      if (!ctx->decode(batch, &logits)) {
        for (Part* p : live) p->more = 0;
        return;
      }
      int64_t row = 0;
      for (Part* p : live) {
        Seq& s = *p->seq;
        s.n_cached += p->count;
        p->more -= p->count;
        snapshot(s);
        if (s.n_cached != static_cast<int64_t>(s.tokens.size())) continue;
        int32_t token;
        const std::string reason = on_logits(
            s, std::span<const float>(logits.data() + row++ * n_vocab, static_cast<size_t>(n_vocab)),
            &token);
        if (!reason.empty()) finish(s, reason);
      }
    }
  }

  // The gauges, published under the lock after every step.
  void publish() {
    const Context::KvUsage kv = ctx->kv_usage();
    int64_t snap_bytes = 0;
    if (model.config().has_recurrent()) {
      std::unordered_set<const RecurrentSnapshot*> seen;  // shared ones count once
      auto count = [&](const Snapshots& v) {
        for (const auto& p : v)
          if (seen.insert(p.get()).second) snap_bytes += static_cast<int64_t>(p->bytes());
      };
      for (const auto& r : running) count(r->snaps);
      for (const Parked& p : parked) count(p.snaps);
    }
    std::vector<LayerMemoryStats> memory;
    if (model.config().memory_segment > 0 && !running.empty()) {
      for (const auto& r : running) {
        const std::vector<LayerMemoryStats> one = memory_stats(*ctx, r->slot);
        if (memory.empty()) memory.assign(one.size(), {});
        for (size_t l = 0; l < one.size(); ++l) {
          memory[l].layer = one[l].layer;
          memory[l].written += one[l].written / static_cast<double>(running.size());
          memory[l].slots_used += one[l].slots_used / static_cast<double>(running.size());
          memory[l].norm += one[l].norm / static_cast<double>(running.size());
        }
      }
    }
    std::lock_guard lock(mu);
    if (!memory.empty()) stats.memory = std::move(memory);  // (kept while none run)
    stats.state_snapshot_bytes = snap_bytes;
    stats.running = static_cast<int64_t>(running.size());
    stats.kv_blocks_used = kv.blocks_used;
    stats.kv_blocks_total = kv.blocks_total;
  }

  void loop() {
    for (;;) {
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] {
          return stop || !queue.empty() || !running.empty() || !embed_queue.empty();
        });
        if (stop && queue.empty() && running.empty() && embed_queue.empty()) return;
      }
      step();
      publish();
    }
  }
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Engine>> Engine::create(const Model& model, const Tokenizer& tok,
                                               const EngineOptions& o) {
  const ModelConfig& c = model.config();
  if (o.max_seqs < 1) return Status::error("max-seqs must be >= 1, got " + std::to_string(o.max_seqs));
  if (o.prefill_chunk < 1)
    return Status::error("prefill-chunk must be >= 1, got " + std::to_string(o.prefill_chunk));
  if (o.max_batch_tokens < 1)
    return Status::error("max-batch-tokens must be >= 1, got " + std::to_string(o.max_batch_tokens));
  if (o.kv_block < 1) return Status::error("kv-block must be >= 1, got " + std::to_string(o.kv_block));
  if (o.n_ctx < 0 || o.kv_memory < 0 || o.n_threads < 1 || o.max_queue < 0 || o.prefix_cache < 0)
    return Status::error("ctx, kv-memory, queue and prefix-cache must be >= 0 and threads >= 1");
  if (o.draft_model != nullptr || o.lookup_ngram > 0)
    NEXUS_RETURN_IF_ERROR(speculation_supported(c));
  if (o.state_snapshots < 0 || o.state_interval < 1)
    return Status::error("state-snapshots must be >= 0 and state-interval >= 1");
  if (tok.n_vocab() > c.n_vocab)
    return Status::error("the tokenizer has " + std::to_string(tok.n_vocab()) +
                         " tokens but the model's embedding has " + std::to_string(c.n_vocab));
  auto impl = std::make_unique<Impl>(model, tok, o);
  // (nexus-ltm's cache and memory do not grow with the context: 4096 however short it trained.)
  impl->n_ctx = o.n_ctx > 0 ? o.n_ctx
                : c.memory_segment > 0
                    ? 4096
                    : std::min<int64_t>(c.n_ctx_train > 0 ? c.n_ctx_train : 4096, 4096);
  impl->n_vocab = c.n_vocab;
  ContextOptions co;
  co.n_ctx = impl->n_ctx;
  co.n_seq = o.max_seqs + o.prefix_cache;  // the cached prefixes keep slots of their own
  co.kv_type = o.kv_type;
  co.kv_block = std::min(o.kv_block, impl->n_ctx);
  impl->opts.kv_block = co.kv_block;
  if (c.has_recurrent() && o.state_snapshots > 0 && o.state_interval % co.kv_block != 0)
    return Status::error("state-interval (" + std::to_string(o.state_interval) +
                         ") must be a multiple of the KV block size (" +
                         std::to_string(co.kv_block) + "): snapshots are shared on block bounds");
  if (o.kv_memory == 0) {
    // max_seqs full contexts; cached prefixes live in what the running sequences leave free.
    co.kv_blocks = o.max_seqs * ((impl->n_ctx + co.kv_block - 1) / co.kv_block);
  } else if (c.n_kv_heads == 0) {
    // No attention: blocks only count positions, and the recurrent state is a fixed size per slot.
    co.kv_blocks = o.max_seqs * ((impl->n_ctx + co.kv_block - 1) / co.kv_block);
  } else {
    const int64_t kvw = c.n_kv_heads * c.head_dim;
    // A hybrid's cache holds its attention layers only.
    const int64_t block_bytes = 2 * c.n_attention_layers() * co.kv_block *
                                static_cast<int64_t>(row_bytes(o.kv_type, kvw));
    co.kv_blocks = o.kv_memory / block_bytes;
    if (co.kv_blocks < 1)
      return Status::error("kv-memory of " + std::to_string(o.kv_memory) +
                           " bytes holds no KV block (one block is " +
                           std::to_string(block_bytes) + " bytes)");
  }
  co.n_threads = o.n_threads;
  co.max_batch = o.max_batch_tokens;
  auto ctx = Context::create(model, co);
  if (!ctx) return ctx.status();
  impl->ctx = std::move(ctx).value();
  if (o.draft_model) {
    if (o.draft_model->config().n_vocab != c.n_vocab)
      return Status::error("the draft model's vocabulary has " +
                           std::to_string(o.draft_model->config().n_vocab) +
                           " tokens, the model's " + std::to_string(c.n_vocab));
    if (o.draft_max < 1) return Status::error("draft-max must be >= 1");
    ContextOptions dco = co;
    dco.kv_blocks = 0;  // full contexts for every slot: the draft model is small
    dco.kv_block = 0;
    auto d = Context::create(*o.draft_model, dco);
    if (!d) return Status::error("draft model: " + d.status().message());
    impl->dctx = std::move(d).value();
  }
  impl->slot_used.assign(static_cast<size_t>(o.max_seqs + o.prefix_cache), false);
  const Context::KvUsage kv = impl->ctx->kv_usage();
  impl->stats.kv_blocks_total = kv.blocks_total;
  impl->stats.ttft = latency_histogram();
  impl->stats.inter_token = latency_histogram();
  impl->stats.e2e = latency_histogram();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->loop(); });
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine::~Engine() { drain(Clock::now()); }

std::shared_ptr<Stream> Engine::submit(GenRequest req, Refusal* why, std::string* message) {
  Impl& m = *impl_;
  auto refuse = [&](Refusal r, std::string msg) -> std::shared_ptr<Stream> {
    *why = r;
    *message = std::move(msg);
    return nullptr;
  };
  if (req.prompt.empty()) return refuse(Refusal::kInvalid, "the prompt is empty");
  for (int32_t id : req.prompt)
    if (id < 0 || id >= m.n_vocab)
      return refuse(Refusal::kInvalid, "token id " + std::to_string(id) +
                                           " is outside the vocabulary of " +
                                           std::to_string(m.n_vocab));
  if (static_cast<int64_t>(req.prompt.size()) >= m.n_ctx)
    return refuse(Refusal::kInvalid, "the prompt is " + std::to_string(req.prompt.size()) +
                                         " tokens; the context holds " + std::to_string(m.n_ctx));
  if (req.max_tokens < -1)
    return refuse(Refusal::kInvalid, "max_tokens must be >= 0, got " + std::to_string(req.max_tokens));
  if (req.top_logprobs < -1 || req.top_logprobs > 20)
    return refuse(Refusal::kInvalid, "top_logprobs must be in [0, 20]");
  if (Status st = validate(req.sampler); !st) return refuse(Refusal::kInvalid, st.message());
  auto s = std::make_unique<Impl::Seq>();
  s->stream = std::make_shared<Stream>();
  s->n_prompt = static_cast<int64_t>(req.prompt.size());
  s->tokens = req.prompt;
  s->sampler = std::make_unique<Sampler>(req.sampler, m.n_vocab);
  for (int32_t id : req.prompt) s->sampler->accept(id);
  s->stop = StopMatcher(req.stop);
  s->req = std::move(req);
  s->t_submit = s->t_last = Clock::now();
  s->snap_every = m.snap_interval();
  std::shared_ptr<Stream> stream = s->stream;
  {
    std::lock_guard lock(m.mu);
    if (!m.accepting) return refuse(Refusal::kShutdown, "the server is shutting down");
    if (static_cast<int>(m.queue.size()) >= m.opts.max_queue)
      return refuse(Refusal::kBusy, "the queue is full (" + std::to_string(m.queue.size()) +
                                        " requests waiting)");
    m.stats.prompt_tokens += static_cast<uint64_t>(s->n_prompt);
    m.queue.push_back(std::move(s));
  }
  m.cv.notify_all();
  *why = Refusal::kNone;
  return stream;
}

Result<std::vector<float>> Engine::embed(std::vector<int32_t> tokens) {
  Impl& m = *impl_;
  if (tokens.empty()) return Status::error("the input is empty");
  if (static_cast<int64_t>(tokens.size()) > m.n_ctx)
    return Status::error("the input is " + std::to_string(tokens.size()) +
                         " tokens; the context holds " + std::to_string(m.n_ctx));
  for (int32_t id : tokens)
    if (id < 0 || id >= m.n_vocab)
      return Status::error("token id " + std::to_string(id) + " is outside the vocabulary of " +
                           std::to_string(m.n_vocab));
  auto job = std::make_unique<Impl::EmbedJob>();
  job->tokens = std::move(tokens);
  std::future<Result<std::vector<float>>> result = job->done.get_future();
  {
    std::lock_guard lock(m.mu);
    if (!m.accepting) return Status::error("the server is shutting down");
    m.embed_queue.push_back(std::move(job));
  }
  m.cv.notify_all();
  return result.get();
}

void Engine::drain(std::chrono::steady_clock::time_point deadline) {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mu);
    m.accepting = false;
    m.deadline = std::min(m.deadline, deadline);
    m.stop = true;
  }
  m.cv.notify_all();
  if (m.thread.joinable()) m.thread.join();
}

EngineStats Engine::stats() const {
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  EngineStats s = m.stats;
  s.queue_depth = static_cast<int64_t>(m.queue.size());
  return s;
}

int64_t Engine::n_ctx() const { return impl_->n_ctx; }
const EngineOptions& Engine::options() const { return impl_->opts; }
const Tokenizer& Engine::tokenizer() const { return impl_->tok; }
const Model& Engine::model() const { return impl_->model; }

}  // namespace nexus::serve
