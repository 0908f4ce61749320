// `nexus index build|search`: a flat vector index of documents' embeddings (runtime/vector_index.h)
// and cosine top-k queries against it, with the model that built it.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "command.h"
#include "nexus/context.h"
#include "nexus/model.h"
#include "nexus/runtime/embedding.h"
#include "nexus/runtime/vector_index.h"
#include "nexus/tokenizer.h"

namespace nexus::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Embedder {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Context> ctx;
  int64_t n_ctx = 0;
  int64_t truncated = 0;

  static Result<Embedder> open(const std::string& path, int64_t n_ctx, int threads) {
    Embedder e;
    auto m = Model::load(path);
    if (!m) return m.status();
    e.model = std::move(m).value();
    auto t = Tokenizer::from_gguf(e.model->gguf());
    if (!t) return t.status();
    e.tok = std::move(t).value();
    ContextOptions co;
    co.n_ctx = n_ctx;
    co.n_threads = threads;
    co.max_batch = std::min<int64_t>(n_ctx, 512);
    auto c = Context::create(*e.model, co);
    if (!c) return c.status();
    e.ctx = std::move(c).value();
    e.n_ctx = n_ctx;
    return e;
  }
  // The text's embedding, its tokens cut to the context (counted in `truncated`).
  Result<std::vector<float>> embed(const std::string& text) {
    std::vector<int32_t> ids = tok->encode(text, true);
    if (static_cast<int64_t>(ids.size()) > n_ctx) {
      ids.resize(static_cast<size_t>(n_ctx));
      ++truncated;
    }
    return embed_tokens(*ctx, 0, ids, ctx->options().max_batch);
  }
};

int build_main(const std::string& model_path, const std::string& input, const std::string& out,
               const std::string& type_name, int64_t n_ctx, int threads, bool quiet) {
  auto type = parse_vector_type(type_name);
  if (!type) return fail("index", type.status().message(), kUsageError);
  if (auto m = overwrites_source(out, {model_path, input})) return fail("index", *m, kUsageError);
  std::ifstream in(input);
  if (!in) return fail("index", "cannot read -i " + input);
  auto e = Embedder::open(model_path, n_ctx, threads);
  if (!e) return fail("index", e.status().message());
  std::vector<std::string> ids;
  std::vector<float> vectors;
  std::string line;
  int64_t line_no = 0;
  const auto t0 = Clock::now();
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(line);
    } catch (const std::exception& ex) {
      return fail("index", input + ":" + std::to_string(line_no) + ": not JSON: " + ex.what());
    }
    if (!doc.is_object() || !doc.contains("text") || !doc["text"].is_string())
      return fail("index", input + ":" + std::to_string(line_no) +
                               ": expected an object with a \"text\" string (and an \"id\")");
    std::string id = std::to_string(line_no);
    if (doc.contains("id"))
      id = doc["id"].is_string() ? doc["id"].get<std::string>() : doc["id"].dump();
    auto v = e->embed(doc["text"].get<std::string>());
    if (!v)
      return fail("index", input + ":" + std::to_string(line_no) + ": " + v.status().message());
    ids.push_back(std::move(id));
    vectors.insert(vectors.end(), v->begin(), v->end());
    if (!quiet && ids.size() % 1000 == 0)
      std::fprintf(stderr, "index: %zu documents embedded\n", ids.size());
  }
  if (ids.empty()) return fail("index", input + " holds no documents");
  const int64_t dim = e->model->config().dim;
  auto ix =
      VectorIndex::build(std::move(ids), vectors, dim, *type, index_model_label(model_path, dim));
  if (!ix) return fail("index", ix.status().message());
  if (Status st = ix->save(out); !st) return fail("index", st.message());
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf(
      "index: %lld documents of dim %lld (%s, %.2f MiB) -> %s in %.1f s (%.0f docs/s)%s\n",
      static_cast<long long>(ix->size()), static_cast<long long>(dim), vector_type_name(*type),
      static_cast<double>(ix->bytes()) / 1048576.0, out.c_str(), secs,
      static_cast<double>(ix->size()) / std::max(secs, 1e-9),
      e->truncated ? (", " + std::to_string(e->truncated) + " cut to -c tokens").c_str() : "");
  return 0;
}

int search_main(const std::string& model_path, const std::string& index_path,
                const std::vector<std::string>& queries, int64_t k, int64_t n_ctx, int threads) {
  auto e = Embedder::open(model_path, n_ctx, threads);
  if (!e) return fail("index", e.status().message());
  auto ix = VectorIndex::load_for_model(index_path, model_path, e->model->config().dim);
  if (!ix) return fail("index", ix.status().message());
  std::vector<float> q;
  for (const std::string& text : queries) {
    auto v = e->embed(text);
    if (!v) return fail("index", v.status().message());
    q.insert(q.end(), v->begin(), v->end());
  }
  ThreadPool pool(threads);
  const auto hits = ix->search(q, static_cast<int64_t>(queries.size()), k, &pool);
  for (size_t i = 0; i < hits.size(); ++i) {
    if (queries.size() > 1) std::printf("query %zu: %s\n", i + 1, queries[i].c_str());
    for (const VectorIndex::Hit& h : hits[i]) std::printf("%.6f\t%s\n", h.score, h.id.c_str());
  }
  return 0;
}

int index_main(int argc, char** argv) {
  CLI::App app{"Embedding search: build a vector index of documents, query it", "nexus index"};
  app.require_subcommand(1);
  std::string model, input, out, index, type = "f32", queries_file;
  std::vector<std::string> queries;
  int64_t k = 5, n_ctx = 512;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool quiet = false;
  CLI::App* build = app.add_subcommand("build", "embed a JSONL file of {\"id\", \"text\"} lines");
  build->add_option("-i,--input", input, "documents, one JSON object a line")->required();
  build->add_option("-o,--output", out, "index file to write (.nxvi)")->required();
  build->add_option("--type", type, "row storage: f32 | f16 | int8")->capture_default_str();
  build->add_flag("-q,--quiet", quiet, "no progress lines");
  CLI::App* search = app.add_subcommand("search", "the top-k documents for each query");
  search->add_option("--index", index, "index file")->required();
  search->add_option("-q,--query", queries, "query text (repeatable)");
  search->add_option("-f,--queries", queries_file, "queries, one a line");
  search->add_option("-k,--top-k", k, "documents a query")->capture_default_str();
  for (CLI::App* sub : {build, search}) {
    sub->add_option("-m,--model", model, "GGUF model that embeds (mean of its hidden states)")
        ->required();
    sub->add_option("-c,--ctx-size", n_ctx, "tokens a text (longer ones are cut)")
        ->capture_default_str();
    sub->add_option("-t,--threads", threads, "threads")->capture_default_str();
  }
  if (auto code = parse_args(app, argc, argv, "index")) return *code;
  if (n_ctx < 1 || threads < 1 || k < 1)
    return fail("index", "-c, -t and -k must be >= 1", kUsageError);
  if (build->parsed()) return build_main(model, input, out, type, n_ctx, threads, quiet);
  if (!queries_file.empty()) {
    std::ifstream in(queries_file);
    if (!in) return fail("index", "cannot read -f " + queries_file);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) queries.push_back(line);
  }
  if (queries.empty()) return fail("index", "give -q TEXT or -f FILE", kUsageError);
  return search_main(model, index, queries, k, n_ctx, threads);
}

Register reg({"index", "embedding search: build a vector index, query it", index_main});

}  // namespace
}  // namespace nexus::cli
