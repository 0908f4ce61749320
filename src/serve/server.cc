// The HTTP front of the serving engine: routes, authentication, OpenAI's request and response
// shapes (JSON and server-sent events), errors, metrics, loading and shutdown.
#include "nexus/serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "nexus/io/gguf.h"
#include "nexus/model.h"
#include "nexus/runtime/vector_index.h"
#include "nexus/tokenizer.h"
#include "serve/api.h"
#include "serve/jinja.h"
#include "serve/metrics.h"

namespace nexus::serve {
namespace {

enum class State { kLoading, kReady, kFailed, kStopping };

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void reply_error(httplib::Response& res, const ApiError& e) {
  reply(res, e.status, error_body(e.what(), e.type, e.code));
}

// RFC 4648 base64 of raw bytes (the SDKs' encoding_format "base64": little-endian float32s).
std::string base64(const void* data, size_t n) {
  static const char* const kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = (uint32_t{p[i]} << 16) | (i + 1 < n ? uint32_t{p[i + 1]} << 8 : 0) |
                       (i + 2 < n ? uint32_t{p[i + 2]} : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < n ? kAlphabet[v & 63] : '=';
  }
  return out;
}

// One choice being generated: its stream and what has come back so far.
struct Choice {
  std::shared_ptr<Stream> stream;
  std::string text;
  std::vector<Event> tokens;  // token events, for log-probabilities
  Event finish;
  bool done = false;
};

}  // namespace

struct Server::Impl {
  ServerOptions opts;
  httplib::Server http;
  std::thread listen_thread, load_thread;
  std::atomic<bool> listen_done{false};  // the listen loop has returned (or never ran)
  int bound_port = 0;

  std::mutex mu;
  std::condition_variable loaded_cv;
  std::atomic<State> state{State::kLoading};
  Status load_status;
  std::unique_ptr<Model> model, draft;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Engine> engine;
  std::optional<VectorIndex> index;  // --index: POST /v1/search
  std::unique_ptr<ThreadPool> search_pool;
  std::unique_ptr<ResponseCache> cache;
  std::string cache_scope;  // the model's (and index's) SHA-256, in front of every key
  ChatFormat chat_format = ChatFormat::kChatML;
  std::shared_ptr<const jinja::Template> chat_template;  // null: the built-in chat_format
  std::string bos_text, eos_text;
  std::atomic<uint64_t> next_id{1};
  RequestCounters counters;
  std::once_flag shutdown_once;

  explicit Impl(ServerOptions o) : opts(std::move(o)) {
    if (opts.model_alias.empty())
      opts.model_alias = std::filesystem::path(opts.model_path).stem().string();
  }

  void load() {
    Status st = Status::ok();
    auto m = Model::load(opts.model_path);
    if (!m) {
      st = m.status();
    } else {
      auto t = Tokenizer::from_gguf((*m)->gguf());
      if (!opts.draft_path.empty()) {
        auto d = Model::load(opts.draft_path);
        if (!d) {
          st = Status::error("draft model: " + d.status().message());
        } else {
          draft = std::move(d).value();
          opts.engine.draft_model = draft.get();
        }
      }
      if (st && !opts.index_path.empty()) {
        auto ix = VectorIndex::load_for_model(opts.index_path, opts.model_path, (*m)->config().dim);
        if (!ix) {
          st = ix.status();
        } else {
          index = std::move(ix).value();
          search_pool = std::make_unique<ThreadPool>(std::max(1, opts.engine.n_threads));
        }
      }
      if (!st) {
        // the draft or the index failed to load
      } else if (!t) {
        st = Status::error(opts.model_path + ": " + t.status().message());
      } else {
        auto e = Engine::create(**m, **t, opts.engine);
        if (!e) {
          st = e.status();
        } else {
          model = std::move(m).value();
          tok = std::move(t).value();
          engine = std::move(e).value();
          const std::string source =
              model->gguf().get_string("tokenizer.chat_template").value_or("");
          chat_format = detect_chat_format(source);
          if (!source.empty()) {
            auto t = jinja::Template::parse(source);
            if (t)
              chat_template = std::move(t).value();
            else
              std::fprintf(stderr, "nexus serve: %s; chat prompts use the built-in %s format\n",
                           t.status().message().c_str(), chat_format_name(chat_format));
          }
          if (tok->bos_id() >= 0) bos_text = tok->token_text(tok->bos_id());
          if (tok->eos_id() >= 0) eos_text = tok->token_text(tok->eos_id());
          if (opts.cache) st = open_cache();
        }
      }
    }
    {
      std::lock_guard lock(mu);
      load_status = st;
      State expected = State::kLoading;
      state.compare_exchange_strong(expected, st ? State::kReady : State::kFailed);
    }
    loaded_cv.notify_all();
  }

  // The cache, keyed under the digests of the files that decide the answers: replicas that
  // serve the same files share entries through Redis, and a changed model never meets old ones.
  Status open_cache() {
    Result<std::unique_ptr<ResponseCache>> c = ResponseCache::create(*opts.cache);
    if (!c) return c.status();
    Result<std::string> digest = file_sha256_hex(opts.model_path);
    if (!digest) return digest.status();
    cache_scope = *digest;
    if (!opts.index_path.empty()) {
      Result<std::string> ix = file_sha256_hex(opts.index_path);
      if (!ix) return ix.status();
      cache_scope += ":" + *ix;
    }
    cache = std::move(c).value();
    return Status::ok();
  }

  // The request's key: the route and every field of the body but `user` (which cannot change the
  // answer). nlohmann's objects keep their keys sorted, so the dump is canonical.
  std::string cache_key(const std::string& route, json body) const {
    body.erase("user");
    return sha256_hex(cache_scope + "\n" + route + "\n" + dump(body));
  }

  // A cached answer when there is one (X-Nexus-Cache: memory or redis); false after marking the
  // response a miss. Completions (`id_prefix` set) get a fresh id and time; other answers go out
  // as stored, without a parse.
  bool reply_cached(const std::string& key, httplib::Response& res,
                    const char* id_prefix = nullptr) {
    CacheTier tier;
    std::optional<std::string> hit = cache->get(key, &tier);
    if (!hit) {
      res.set_header("X-Nexus-Cache", "miss");
      return false;
    }
    res.set_header("X-Nexus-Cache", tier == CacheTier::kMemory ? "memory" : "redis");
    if (id_prefix == nullptr) {
      res.status = 200;
      res.set_content(std::move(*hit), "application/json");
      return true;
    }
    json body = json::parse(*hit, nullptr, false);
    if (body.is_discarded()) throw ApiError(500, "a cached answer is not JSON", "server_error");
    body["id"] = new_id(id_prefix);
    body["created"] = static_cast<int64_t>(std::time(nullptr));
    reply(res, 200, body);
    return true;
  }

  // 503 unless the model is ready and the server is not stopping.
  void check_ready() const {
    const State s = state.load();
    if (s == State::kLoading) throw ApiError(503, "the model is loading", "unavailable_error");
    if (s == State::kStopping) throw ApiError(503, "the server is shutting down", "unavailable_error");
    if (s == State::kFailed) throw ApiError(503, "the model failed to load", "unavailable_error");
  }

  std::string new_id(const char* prefix) { return prefix + std::to_string(next_id++); }

  // The chat prompt: the model's template when it parsed (its raise_exception is the client's
  // error: 400), else the built-in format it was recognised as. The request's `tools` (OpenAI's
  // function definitions) go to the template as `tools`, as Hugging Face passes them.
  std::string render_prompt(const std::vector<ChatMessage>& messages, const json& body) const {
    if (!chat_template) return render_chat(chat_format, messages, true, bos_text, eos_text);
    jinja::Value list = jinja::Value::array();
    for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
    jinja::Value ctx = {{"messages", list},
                        {"add_generation_prompt", true},
                        {"bos_token", bos_text},
                        {"eos_token", eos_text}};
    if (auto t = body.find("tools"); t != body.end() && !t->is_null()) {
      if (!t->is_array()) throw ApiError(400, "'tools' must be an array");
      ctx["tools"] = jinja::Value::parse(t->dump());
    }
    Result<std::string> r = chat_template->render(ctx);
    if (!r) throw ApiError(400, r.status().message());
    return std::move(r).value();
  }

  std::vector<int32_t> encode_prompt(const std::string& text, bool add_bos) const {
    std::vector<int32_t> ids = tok->encode(text, add_bos && tok->add_bos(), true);
    if (ids.empty()) {
      if (tok->bos_id() < 0) throw ApiError(400, "the prompt is empty and the vocabulary has no BOS");
      ids.push_back(tok->bos_id());
    }
    return ids;
  }

  // Submits every prompt n times; on a refusal cancels what was submitted and throws.
  std::vector<Choice> submit_all(const std::vector<std::vector<int32_t>>& prompts,
                                 const Sampling& s) {
    std::vector<Choice> choices;
    for (const auto& p : prompts)
      for (int k = 0; k < s.n; ++k) {
        GenRequest r;
        r.prompt = p;
        r.sampler = s.sampler;
        r.sampler.seed += static_cast<uint64_t>(k);  // the n choices differ
        r.max_tokens = s.max_tokens;
        r.stop = s.stop;
        r.top_logprobs = s.top_logprobs;
        Refusal why = Refusal::kNone;
        std::string message;
        std::shared_ptr<Stream> stream = engine->submit(std::move(r), &why, &message);
        if (!stream) {
          for (Choice& c : choices) c.stream->cancel();
          if (why == Refusal::kBusy) throw ApiError(429, message, "rate_limit_error");
          if (why == Refusal::kShutdown) throw ApiError(503, message, "unavailable_error");
          throw ApiError(400, message);
        }
        choices.push_back({stream, "", {}, {}, false});
      }
    return choices;
  }

  json logprobs_completion(const Choice& c) const {
    json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
    size_t offset = 0;
    for (const Event& e : c.tokens) {
      const std::string piece = tok->token_to_piece(e.token);
      tokens.push_back(piece);
      lps.push_back(e.logprob);
      json top = json::object();
      for (const TokenLogprob& t : e.top) top[tok->token_to_piece(t.id)] = t.logprob;
      tops.push_back(top);
      offsets.push_back(offset);
      offset += piece.size();
    }
    return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops},
            {"text_offset", offsets}};
  }

  json token_logprob(int32_t id, float lp) const {
    const std::string piece = tok->token_to_piece(id);
    json bytes = json::array();
    for (unsigned char ch : piece) bytes.push_back(static_cast<int>(ch));
    return {{"token", piece}, {"logprob", lp}, {"bytes", bytes}};
  }

  json logprobs_chat(const std::vector<Event>& events) const {
    json content = json::array();
    for (const Event& e : events) {
      json entry = token_logprob(e.token, e.logprob);
      json top = json::array();
      for (const TokenLogprob& t : e.top) top.push_back(token_logprob(t.id, t.logprob));
      entry["top_logprobs"] = top;
      content.push_back(entry);
    }
    return {{"content", content}};
  }

  static json usage(int64_t prompt, int64_t completion) {
    return {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion}};
  }

  void handle_generate(const httplib::Request& req, httplib::Response& res, bool chat) {
    check_ready();
    const json body = parse_body(req.body);
    Sampling s = parse_sampling(body, chat ? -1 : 16);
    if (!s.model.empty() && s.model != opts.model_alias &&
        s.model != std::filesystem::path(opts.model_path).filename().string())
      throw ApiError(404, "the model '" + s.model + "' does not exist (this server has '" +
                              opts.model_alias + "')",
                     "not_found_error", "model_not_found");
    // Greedy or seeded answers repeat; streams are not kept.
    std::string key;
    if (cache) {
      const bool repeatable =
          s.sampler.temperature <= 0.0f || (body.contains("seed") && !body["seed"].is_null());
      if (!repeatable || s.stream) {
        res.set_header("X-Nexus-Cache", "bypass");
      } else {
        key = cache_key(chat ? "chat" : "completions", body);
        if (reply_cached(key, res, chat ? "chatcmpl-" : "cmpl-")) return;
      }
    }
    std::vector<std::vector<int32_t>> prompts;
    if (chat) {
      const std::vector<ChatMessage> messages = parse_messages(body);
      prompts.push_back(encode_prompt(render_prompt(messages, body), false));
      const bool lp = body.contains("logprobs") && body["logprobs"].is_boolean() &&
                      body["logprobs"].get<bool>();
      if (body.contains("logprobs") && !body["logprobs"].is_boolean() && !body["logprobs"].is_null())
        throw ApiError(400, "'logprobs' must be a boolean");
      if (auto it = body.find("top_logprobs"); it != body.end() && !it->is_null()) {
        if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 20)
          throw ApiError(400, "'top_logprobs' must be an integer in [0, 20]");
        if (!lp) throw ApiError(400, "'top_logprobs' needs 'logprobs': true");
        s.top_logprobs = static_cast<int>(it->get<int64_t>());
      } else if (lp) {
        s.top_logprobs = 0;
      }
    } else {
      const Prompts p = parse_prompts(body);
      size_t ti = 0, ii = 0;
      for (bool text : p.is_text)
        prompts.push_back(text ? encode_prompt(p.texts[ti++], true) : p.ids[ii++]);
      if (auto it = body.find("logprobs"); it != body.end() && !it->is_null()) {
        if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 5)
          throw ApiError(400, "'logprobs' must be an integer in [0, 5]");
        s.top_logprobs = static_cast<int>(it->get<int64_t>());
      }
      if (get_bool(body, "echo", false)) throw ApiError(400, "'echo' is not supported");
    }
    std::vector<Choice> choices = submit_all(prompts, s);
    const std::string id = new_id(chat ? "chatcmpl-" : "cmpl-");
    const int64_t created = static_cast<int64_t>(std::time(nullptr));
    if (s.stream) return stream(req, res, std::move(choices), s, id, created, chat);

    int64_t prompt_tokens = 0, completion_tokens = 0;
    json out_choices = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      Choice& c = choices[i];
      Event e;
      while (!c.done) {
        if (!c.stream->next(&e, std::chrono::milliseconds(100))) continue;
        c.text += e.text;
        if (e.kind == Event::Kind::kFinish) {
          c.finish = e;
          c.done = true;
        } else {
          c.tokens.push_back(e);
        }
      }
      if (c.finish.finish_reason == "error") {
        for (Choice& o : choices) o.stream->cancel();
        throw ApiError(500, c.finish.error, "server_error");
      }
      if (i % static_cast<size_t>(s.n) == 0) prompt_tokens += c.finish.prompt_tokens;
      completion_tokens += c.finish.completion_tokens;
      json lp = s.top_logprobs >= 0 ? (chat ? logprobs_chat(c.tokens) : logprobs_completion(c))
                                    : json();
      json choice = {{"index", i}, {"logprobs", lp}, {"finish_reason", c.finish.finish_reason}};
      if (chat)
        choice["message"] = {{"role", "assistant"}, {"content", c.text}};
      else
        choice["text"] = c.text;
      out_choices.push_back(choice);
    }
    const json out = {{"id", id},
                      {"object", chat ? "chat.completion" : "text_completion"},
                      {"created", created},
                      {"model", opts.model_alias},
                      {"choices", out_choices},
                      {"usage", usage(prompt_tokens, completion_tokens)}};
    if (!key.empty()) cache->put(key, dump(out));
    reply(res, 200, out);
  }

  // Server-sent events as OpenAI's clients parse them: "data: {chunk}\n\n" per event, the role
  // first (chat), finish_reason in each choice's last chunk, the usage chunk when asked for, then
  // "data: [DONE]". A client that goes away cancels every choice. HTTP/1.0 has no chunked
  // encoding: such a client (nginx's proxy_http_version 1.0 among them) gets the stream delimited
  // by the connection's close, so a stream cut short shows as an end without "[DONE]".
  void stream(const httplib::Request& req, httplib::Response& res, std::vector<Choice> choices,
              const Sampling& s, const std::string& id, int64_t created, bool chat) {
    auto shared = std::make_shared<std::vector<Choice>>(std::move(choices));
    const int n_per_prompt = s.n;
    const bool include_usage = s.include_usage;
    const bool want_lp = s.top_logprobs >= 0;
    res.set_header("Cache-Control", "no-cache");
    auto provider =
        [this, shared, id, created, chat, include_usage, n_per_prompt, want_lp](
            size_t, httplib::DataSink& sink) {
          auto send = [&](const json& chunk) {
            const std::string line = "data: " + dump(chunk) + "\n\n";
            return sink.write(line.data(), line.size());
          };
          auto chunk = [&](json choice) {
            json c = {{"id", id},
                      {"object", chat ? "chat.completion.chunk" : "text_completion"},
                      {"created", created},
                      {"model", opts.model_alias},
                      {"choices", json::array({std::move(choice)})}};
            if (include_usage) c["usage"] = nullptr;
            return c;
          };
          std::vector<Choice>& cs = *shared;
          if (chat)
            for (size_t i = 0; i < cs.size(); ++i)
              if (!send(chunk({{"index", i},
                               {"delta", {{"role", "assistant"}, {"content", ""}}},
                               {"logprobs", nullptr},
                               {"finish_reason", nullptr}})))
                return false;
          size_t open = cs.size();
          int64_t prompt_tokens = 0, completion_tokens = 0;
          while (open > 0) {
            for (size_t i = 0; i < cs.size(); ++i) {
              Choice& c = cs[i];
              if (c.done) continue;
              Event e;
              if (!c.stream->next(&e, std::chrono::milliseconds(open == 1 ? 100 : 5))) {
                if (!sink.is_writable()) return false;
                continue;
              }
              const bool last = e.kind == Event::Kind::kFinish;
              if (last && e.finish_reason == "error") {
                send({{"error", {{"message", e.error}, {"type", "server_error"}, {"code", nullptr}}}});
                for (Choice& o : cs) o.stream->cancel();
                const std::string done = "data: [DONE]\n\n";
                sink.write(done.data(), done.size());
                sink.done();
                return true;
              }
              if (!last && e.text.empty() && !want_lp) continue;  // held back, nothing to say
              json lp = nullptr;
              if (!last && want_lp) {
                Choice one;
                one.tokens.push_back(e);
                lp = chat ? logprobs_chat(one.tokens) : logprobs_completion(one);
              }
              json choice = {{"index", i}, {"logprobs", lp},
                             {"finish_reason", last ? json(e.finish_reason) : json()}};
              if (chat)
                choice["delta"] = e.text.empty() && last ? json::object()
                                                         : json{{"content", e.text}};
              else
                choice["text"] = e.text;
              if (!send(chunk(choice))) return false;
              if (last) {
                c.done = true;
                --open;
                if (i % static_cast<size_t>(n_per_prompt) == 0) prompt_tokens += e.prompt_tokens;
                completion_tokens += e.completion_tokens;
              }
            }
          }
          if (include_usage) {
            json u = {{"id", id},
                      {"object", chat ? "chat.completion.chunk" : "text_completion"},
                      {"created", created},
                      {"model", opts.model_alias},
                      {"choices", json::array()},
                      {"usage", usage(prompt_tokens, completion_tokens)}};
            if (!send(u)) return false;
          }
          const std::string done = "data: [DONE]\n\n";
          if (!sink.write(done.data(), done.size())) return false;
          sink.done();
          return true;
        };
    auto releaser = [shared](bool) {
      for (Choice& c : *shared)
        if (!c.done) c.stream->cancel();
    };
    if (req.version == "HTTP/1.0")
      res.set_content_provider("text/event-stream", std::move(provider), std::move(releaser));
    else
      res.set_chunked_content_provider("text/event-stream", std::move(provider),
                                       std::move(releaser));
  }

  // Pooled, L2-normalised hidden states of each input (Engine::embed).
  void handle_embeddings(const httplib::Request& req, httplib::Response& res) {
    check_ready();
    const json body = parse_body(req.body);
    if (auto it = body.find("model"); it != body.end() && !it->is_null() &&
        (!it->is_string() || (it->get<std::string>() != opts.model_alias &&
                               it->get<std::string>() !=
                                   std::filesystem::path(opts.model_path).filename().string())))
      throw ApiError(404, "the model " + it->dump() + " does not exist (this server has '" +
                              opts.model_alias + "')",
                     "not_found_error", "model_not_found");
    json input = body.contains("input") ? body["input"] : json();
    if (input.is_null()) throw ApiError(400, "'input' is required");
    json prompt_body = {{"prompt", input}};
    const Prompts p = parse_prompts(prompt_body);
    std::string format = "float";
    if (auto it = body.find("encoding_format"); it != body.end() && !it->is_null()) {
      if (!it->is_string() || (*it != "float" && *it != "base64"))
        throw ApiError(400, "'encoding_format' must be \"float\" or \"base64\"");
      format = it->get<std::string>();
    }
    const std::string key = cache ? cache_key("embeddings", body) : "";
    if (cache && reply_cached(key, res)) return;
    json data = json::array();
    int64_t tokens = 0;
    size_t ti = 0, ii = 0;
    for (size_t i = 0; i < p.is_text.size(); ++i) {
      std::vector<int32_t> ids = p.is_text[i] ? encode_prompt(p.texts[ti++], true) : p.ids[ii++];
      tokens += static_cast<int64_t>(ids.size());
      Result<std::vector<float>> e = engine->embed(std::move(ids));
      if (!e) throw ApiError(400, e.status().message());
      json vec = format == "base64" ? json(base64(e->data(), e->size() * sizeof(float)))
                                    : json(*e);
      data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(vec)}});
    }
    reply_list(res, key, std::move(data), tokens);
  }

  // {"object": "list", "data": ...} with the prompt tokens' usage, kept in the cache under `key`
  // when there is one.
  void reply_list(httplib::Response& res, const std::string& key, json data, int64_t tokens) {
    const json out = {{"object", "list"},
                      {"data", std::move(data)},
                      {"model", opts.model_alias},
                      {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
    if (cache) cache->put(key, dump(out));
    reply(res, 200, out);
  }

  // The index's top_k documents for each query (its embedding as /v1/embeddings computes it).
  void handle_search(const httplib::Request& req, httplib::Response& res) {
    check_ready();
    if (!index)
      throw ApiError(404, "this server has no vector index (start it with --index FILE)",
                     "not_found_error", "index_not_found");
    const json body = parse_body(req.body);
    json query = body.contains("query") ? body["query"] : json();
    if (!query.is_string() && !(query.is_array() && !query.empty()))
      throw ApiError(400, "'query' must be a string or a non-empty array of strings");
    if (query.is_string()) query = json::array({query});
    int64_t k = 5;
    if (auto it = body.find("top_k"); it != body.end() && !it->is_null()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 1000)
        throw ApiError(400, "'top_k' must be an integer from 1 to 1000");
      k = it->get<int64_t>();
    }
    const std::string key = cache ? cache_key("search", body) : "";
    if (cache && reply_cached(key, res)) return;
    std::vector<float> q;
    int64_t tokens = 0;
    for (const json& text : query) {
      if (!text.is_string()) throw ApiError(400, "'query' must hold strings");
      std::vector<int32_t> ids = encode_prompt(text.get<std::string>(), true);
      tokens += static_cast<int64_t>(ids.size());
      Result<std::vector<float>> e = engine->embed(std::move(ids));
      if (!e) throw ApiError(400, e.status().message());
      q.insert(q.end(), e->begin(), e->end());
    }
    const auto nq = static_cast<int64_t>(query.size());
    const auto hits = index->search(q, nq, k, search_pool.get());
    json data = json::array();
    for (int64_t i = 0; i < nq; ++i) {
      json results = json::array();
      for (const VectorIndex::Hit& h : hits[i])
        results.push_back({{"id", h.id}, {"score", h.score}});
      data.push_back({{"object", "search_result"}, {"index", i}, {"results", std::move(results)}});
    }
    reply_list(res, key, std::move(data), tokens);
  }

  void handle_tokenize(const httplib::Request& req, httplib::Response& res) {
    check_ready();
    const json body = parse_body(req.body);
    auto it = body.find("content");
    if (it == body.end() || !it->is_string()) throw ApiError(400, "'content' must be a string");
    const bool add_special = get_bool(body, "add_special", false);
    const bool with_pieces = get_bool(body, "with_pieces", false);
    const std::vector<int32_t> ids = tok->encode(it->get<std::string>(), add_special, true);
    json tokens = json::array();
    for (int32_t id : ids) {
      if (with_pieces)
        tokens.push_back({{"id", id}, {"piece", tok->token_to_piece(id)}});
      else
        tokens.push_back(id);
    }
    reply(res, 200, {{"tokens", tokens}});
  }

  void handle_detokenize(const httplib::Request& req, httplib::Response& res) {
    check_ready();
    const json body = parse_body(req.body);
    auto it = body.find("tokens");
    if (it == body.end() || !it->is_array()) throw ApiError(400, "'tokens' must be an array of ids");
    std::vector<int32_t> ids;
    for (const json& v : *it) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= tok->n_vocab())
        throw ApiError(400, "'tokens' holds " + v.dump() + ", not an id in [0, " +
                                std::to_string(tok->n_vocab()) + ")");
      ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    reply(res, 200, {{"content", tok->decode(ids)}});
  }

  void routes() {
    auto guarded = [this](auto fn) {
      return [this, fn](const httplib::Request& req, httplib::Response& res) {
        try {
          fn(req, res);
        } catch (const ApiError& e) {
          reply_error(res, e);
        } catch (const std::exception& e) {
          reply_error(res, ApiError(500, e.what(), "server_error"));
        }
      };
    };
    http.Post("/v1/completions", guarded([this](auto& q, auto& r) { handle_generate(q, r, false); }));
    http.Post("/v1/chat/completions",
              guarded([this](auto& q, auto& r) { handle_generate(q, r, true); }));
    http.Post("/v1/embeddings", guarded([this](auto& q, auto& r) { handle_embeddings(q, r); }));
    http.Post("/v1/search", guarded([this](auto& q, auto& r) { handle_search(q, r); }));
    http.Post("/tokenize", guarded([this](auto& q, auto& r) { handle_tokenize(q, r); }));
    http.Post("/detokenize", guarded([this](auto& q, auto& r) { handle_detokenize(q, r); }));
    http.Get("/v1/models", guarded([this](auto&, auto& r) {
               check_ready();
               reply(r, 200,
                     {{"object", "list"},
                      {"data", json::array({{{"id", opts.model_alias},
                                             {"object", "model"},
                                             {"created", 0},
                                             {"owned_by", "nexus"}}})}});
             }));
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const State s = state.load();
      if (s == State::kReady) return reply(res, 200, {{"status", "ok"}});
      reply(res, 503,
            error_body(s == State::kLoading ? "the model is loading"
                       : s == State::kFailed ? "the model failed to load"
                                             : "the server is shutting down",
                       "unavailable_error", ""));
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      EngineStats st;
      if (engine) st = engine->stats();
      CacheStats cs;
      if (cache) cs = cache->stats();
      res.set_content(prometheus_text(engine ? &st : nullptr, counters, cache ? &cs : nullptr),
                      "text/plain; version=0.0.4");
    });
    // Authentication before routing: every route but /health and /metrics.
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (opts.api_key.empty() || req.path == "/health" || req.path == "/metrics")
        return httplib::Server::HandlerResponse::Unhandled;
      const std::string auth = req.get_header_value("Authorization");
      if (auth == "Bearer " + opts.api_key) return httplib::Server::HandlerResponse::Unhandled;
      reply(res, 401,
            error_body(auth.empty() ? "missing API key (send 'Authorization: Bearer KEY')"
                                    : "invalid API key",
                       "authentication_error", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    });
    // Statuses httplib sets itself (no route, body too large, unreadable request) get a body in
    // OpenAI's shape.
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 404)
        reply(res, 404, error_body("no route " + req.method + " " + req.path, "not_found_error", ""));
      else if (res.status == 413)
        reply(res, 413, error_body("the request body is too large", "invalid_request_error", ""));
      else
        reply(res, res.status, error_body("bad request", "invalid_request_error", ""));
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      counters.add(req.path, res.status);
    });
    http.set_payload_max_length(opts.max_body);
    // Clients keep their connection for many requests; a server-side cap of 5 (httplib's
    // default) closes connections under clients that are about to send on them.
    http.set_keep_alive_max_count(100000);
    const int threads = opts.http_threads > 0 ? opts.http_threads : 64 + 2 * opts.engine.max_seqs;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  }
};

Server::Server(ServerOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}

Server::~Server() { shutdown(std::chrono::milliseconds(0)); }

Status Server::start() {
  Impl& m = *impl_;
  m.routes();
  // Debian's cpp-httplib listens with a backlog of 5 (compiled into its library): a burst of
  // clients connecting at once overflows it, and the kernel's 1 s SYN retry shows as a second of
  // time to first token. The listening socket is kept here and given a deeper backlog below
  // (listen() again on a listening socket only changes its backlog).
  socket_t listener = INVALID_SOCKET;
  m.http.set_socket_options([&listener](socket_t sock) {
    httplib::default_socket_options(sock);
    listener = sock;
  });
  if (m.opts.port == 0) {
    m.bound_port = m.http.bind_to_any_port(m.opts.host);
    if (m.bound_port <= 0) return Status::error("cannot bind " + m.opts.host + " to any port");
  } else {
    if (!m.http.bind_to_port(m.opts.host, m.opts.port))
      return Status::error("cannot bind " + m.opts.host + ":" + std::to_string(m.opts.port) +
                           " (in use, or not an address of this machine)");
    m.bound_port = m.opts.port;
  }
  if (listener != INVALID_SOCKET) ::listen(listener, 1024);
  m.http.set_socket_options(httplib::default_socket_options);
  m.listen_thread = std::thread([&m] {
    m.http.listen_after_bind();
    m.listen_done.store(true);
  });
  m.load_thread = std::thread([&m] { m.load(); });
  return Status::ok();
}

int Server::port() const { return impl_->bound_port; }

Status Server::wait_loaded() {
  Impl& m = *impl_;
  std::unique_lock lock(m.mu);
  m.loaded_cv.wait(lock, [&] { return m.state.load() != State::kLoading; });
  return m.load_status;
}

void Server::shutdown(std::chrono::milliseconds grace) {
  Impl& m = *impl_;
  std::call_once(m.shutdown_once, [&] {
    if (m.load_thread.joinable()) m.load_thread.join();
    m.state.store(State::kStopping);
    if (m.engine) m.engine->drain(std::chrono::steady_clock::now() + grace);
    // httplib's stop() does nothing before the listen loop has started (a model that fails to
    // load at once gets here that early): wait for the loop, or for it to have returned.
    while (!m.http.is_running() && !m.listen_done.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    m.http.stop();
    if (m.listen_thread.joinable()) m.listen_thread.join();
  });
}

}  // namespace nexus::serve
