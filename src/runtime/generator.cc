// The generation loop shared by `nexus run` (and later the server).
#include "nexus/runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <span>

#include "nexus/profile.h"
#include "runtime/lookup.h"
#include "runtime/stop.h"

namespace nexus {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The draft model's greedy proposal of up to `room` tokens after `all`: it first reads the tokens
// of `all` it has not (the last one asks for logits). None when a pass fails (its cache is then
// cleared, to be refilled).
std::vector<int32_t> propose(Context& draft, const std::vector<int32_t>& all, int seq,
                             int64_t* d_cached, int64_t room) {
  std::vector<int32_t> out;
  if (room <= 0) return out;
  const int64_t n_vocab = draft.model().config().n_vocab, max_batch = draft.options().max_batch;
  auto argmax = [&](const std::vector<float>& l) {
    return static_cast<int32_t>(std::max_element(l.begin(), l.begin() + n_vocab) - l.begin());
  };
  std::vector<float> logits;
  Batch b;
  const int64_t size = static_cast<int64_t>(all.size());
  for (int64_t p = *d_cached; p < size; p += max_batch) {
    b.clear();
    const int64_t end = std::min(size, p + max_batch);
    for (int64_t q = p; q < end; ++q) b.add(all[q], static_cast<int32_t>(q), seq, q + 1 == size);
    if (!draft.decode(b, &logits)) {
      draft.clear_seq(seq);
      *d_cached = 0;
      return {};
    }
    *d_cached = end;
  }
  out.push_back(argmax(logits));
  while (static_cast<int64_t>(out.size()) < room) {
    b.clear();
    b.add(out.back(), static_cast<int32_t>(*d_cached), seq, true);
    if (!draft.decode(b, &logits)) break;
    ++*d_cached;
    out.push_back(argmax(logits));
  }
  return out;
}

}  // namespace

Status speculation_supported(const ModelConfig& c) {
  if (!c.has_recurrent()) return Status::ok();
  return Status::error("speculative decoding (--draft, --lookup-ngram) is not available for " +
                       c.arch_name +
                       ": it rolls rejected tokens back, and a recurrent state cannot be rolled "
                       "back yet");
}

Result<GenerateStats> generate(Context& ctx, const Tokenizer& tok, std::string_view prompt,
                               const GenerateOptions& opts,
                               const std::function<bool(std::string_view)>& on_text) {
  NEXUS_RETURN_IF_ERROR(validate(opts.sampler));
  if (opts.draft != nullptr || opts.lookup_ngram > 0)
    NEXUS_RETURN_IF_ERROR(speculation_supported(ctx.model().config()));
  if (opts.n_predict < -1) return Status::error("-n must be >= 0 (or -1 for unlimited)");
  const int64_t n_ctx = ctx.options().n_ctx;
  const int64_t n_vocab = ctx.model().config().n_vocab;
  if (tok.n_vocab() > n_vocab)
    return Status::error("tokenizer has " + std::to_string(tok.n_vocab()) +
                         " tokens but the model's embedding has " + std::to_string(n_vocab));

  std::vector<int32_t> ids;
  {
    NEXUS_PROFILE_SCOPE("tokenize");
    ids = tok.encode(prompt, opts.add_bos);
  }
  if (ids.empty()) {
    if (tok.bos_id() < 0) return Status::error("empty prompt and the vocabulary has no BOS token");
    ids.push_back(tok.bos_id());
  }
  if (static_cast<int64_t>(ids.size()) >= n_ctx)
    return Status::error("prompt is " + std::to_string(ids.size()) +
                         " tokens, which does not fit the context of " + std::to_string(n_ctx) +
                         " (use -c to enlarge it)");

  GenerateStats stats;
  stats.n_prompt = static_cast<int64_t>(ids.size());
  ctx.clear_seq(opts.seq);
  Sampler sampler(opts.sampler, n_vocab);
  for (int32_t id : ids) sampler.accept(id);
  StopMatcher stop(opts.stop);

  // Prefill in chunks of n_batch; logits only for the last prompt token.
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits;
  Batch batch;
  const int64_t chunk = std::max<int64_t>(1, std::min(opts.n_batch, ctx.options().max_batch));
  for (size_t i = 0; i < ids.size(); i += chunk) {
    batch.clear();
    const size_t end = std::min(ids.size(), i + chunk);
    for (size_t j = i; j < end; ++j)
      batch.add(ids[j], static_cast<int32_t>(j), opts.seq, j + 1 == ids.size());
    NEXUS_RETURN_IF_ERROR(ctx.decode(batch, &logits));
  }
  stats.prefill_seconds = seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  // pos: where the next token goes; logits row `row` follows it. With prompt lookup a decode()
  // also feeds the drafts after the token, and its rows follow each of them: a draft that equals
  // the token sampled before it is already in the cache, and its row is the next one to sample.
  int32_t pos = static_cast<int32_t>(ids.size());
  std::vector<int32_t> all = ids, draft;
  size_t row = 0;
  int32_t fed_end = pos;
  int64_t d_cached = 0;  // tokens of `all` in the draft model's cache
  if (opts.draft) opts.draft->clear_seq(opts.seq);
  stats.stop_reason = "length";
  for (;;) {
    if (opts.n_predict >= 0 && stats.n_generated >= opts.n_predict) break;
    int32_t next;
    {
      NEXUS_PROFILE_SCOPE("sample");
      next = sampler.sample(std::span<const float>(logits.data() + row * n_vocab,
                                                   static_cast<size_t>(n_vocab)));
      sampler.accept(next);
    }
    if (!opts.ignore_eos && tok.is_eog(next)) {
      stats.stop_reason = "eos";
      break;
    }
    stats.tokens.push_back(next);
    all.push_back(next);
    ++stats.n_generated;
    StopResult r = stop.feed(tok.token_to_piece(next));
    if (!r.text.empty() && !on_text(r.text)) {
      stats.stop_reason = "stop";
      break;
    }
    if (r.stopped) {
      stats.stop_reason = "stop";
      break;
    }
    if (pos >= n_ctx) {
      stats.stop_reason = "context";
      break;
    }
    if (opts.n_predict >= 0 && stats.n_generated >= opts.n_predict) break;
    if (row < draft.size() && next == draft[row]) {  // a draft stands: it is fed already
      ++row;
      ++pos;
      ++stats.accepted;
      continue;
    }
    if (fed_end > pos) ctx.clear_seq(opts.seq, pos);  // the drafts that fell
    int64_t room = std::min<int64_t>(opts.draft ? opts.draft_max : opts.lookup_max, n_ctx - 1 - pos);
    if (opts.n_predict >= 0) room = std::min<int64_t>(room, opts.n_predict - stats.n_generated - 1);
    room = std::min<int64_t>(room, ctx.options().max_batch - 1);
    if (opts.draft) {
      if (d_cached > pos) opts.draft->clear_seq(opts.seq, pos);  // its proposals that fell
      d_cached = std::min<int64_t>(d_cached, pos);
      draft = propose(*opts.draft, all, opts.seq, &d_cached, room);
    } else {
      draft = lookup_draft(all, opts.lookup_ngram, room);
    }
    batch.clear();
    batch.add(next, pos, opts.seq, true);
    for (size_t j = 0; j < draft.size(); ++j)
      batch.add(draft[j], static_cast<int32_t>(pos + 1 + j), opts.seq, true);
    NEXUS_RETURN_IF_ERROR(ctx.decode(batch, &logits));
    ++stats.decode_calls;
    stats.drafted += static_cast<int64_t>(draft.size());
    fed_end = pos + 1 + static_cast<int32_t>(draft.size());
    ++pos;
    row = 0;
  }
  if (stats.stop_reason != "stop") {
    StopResult r = stop.flush();
    if (!r.text.empty()) on_text(r.text);
  }
  stats.decode_seconds = seconds_since(t0);
  return stats;
}

}  // namespace nexus
