// `nexus info MODEL.gguf`: metadata, hyper-parameters, parameter count and tensor table.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>

#include "command.h"
#include "nexus/io/gguf.h"

namespace nexus::cli {
namespace {

int info_main(int argc, char** argv) {
  CLI::App app{"Show a GGUF model's architecture, hyper-parameters and tensors", "nexus info"};
  std::string path;
  bool all_meta = false;
  bool tensors = false;
  app.add_option("model", path, "GGUF file")->required();
  app.add_flag("--metadata", all_meta, "print every metadata key (arrays abbreviated)");
  app.add_flag("--tensors", tensors, "print every tensor");
  if (auto code = parse_args(app, argc, argv, "info")) return *code;
  auto r = GgufFile::open(path);
  if (!r) return fail("info", r.status().message());
  const GgufFile& g = r.value();
  const std::string arch = g.get_string("general.architecture").value_or("(none)");
  std::printf("file:          %s (%zu bytes, GGUF v%u)\n", path.c_str(), g.file_size(), g.version());
  std::printf("architecture:  %s\n", arch.c_str());
  if (auto n = g.get_string("general.name")) std::printf("name:          %s\n", n->c_str());
  static const char* kHyper[] = {"context_length",
                                 "embedding_length",
                                 "block_count",
                                 "feed_forward_length",
                                 "attention.head_count",
                                 "attention.head_count_kv",
                                 "attention.key_length",
                                 "rope.freq_base",
                                 "attention.layer_norm_rms_epsilon",
                                 "attention.layer_norm_epsilon",
                                 "attention.sliding_window",
                                 "memory.kind",
                                 "memory.depth",
                                 "memory.hidden",
                                 "memory.rope",
                                 "memory.segment_length",
                                 "memory.slots"};
  for (const char* k : kHyper)
    if (const GgufValue* v = g.find(arch + "." + k)) {
      std::string text = v->to_string();
      // Short per-layer integer arrays (memory.slots, a hybrid's head counts) in full.
      if (const std::vector<int64_t>* a = g.get_int_array(arch + "." + k); a && a->size() <= 64) {
        text.clear();
        for (int64_t x : *a) text += (text.empty() ? "" : " ") + std::to_string(x);
      }
      std::printf("  %-34s %s\n", k, text.c_str());
    }
  if (auto m = g.get_string("tokenizer.ggml.model")) {
    const auto* toks = g.get_string_array("tokenizer.ggml.tokens");
    std::printf("tokenizer:     %s, %zu tokens", m->c_str(), toks ? toks->size() : 0);
    if (auto p = g.get_string("tokenizer.ggml.pre")) std::printf(", pre %s", p->c_str());
    std::printf("\n");
  }
  int64_t params = 0;
  size_t bytes = 0;
  std::map<std::string, std::pair<int, size_t>> by_type;
  for (const auto& t : g.tensors()) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    params += n;
    bytes += t.nbytes;
    auto& e = by_type[std::string(dtype_name(t.dtype))];
    e.first++;
    e.second += t.nbytes;
  }
  std::printf("parameters:    %lld (%.2f M)\n", static_cast<long long>(params), params / 1e6);
  std::printf("tensors:       %zu, %.2f MiB\n", g.tensors().size(), bytes / 1048576.0);
  for (const auto& [name, e] : by_type)
    std::printf("  %-6s %4d tensors  %10.2f MiB\n", name.c_str(), e.first, e.second / 1048576.0);
  if (all_meta) {
    std::printf("metadata:\n");
    for (const auto& [k, v] : g.metadata()) std::printf("  %-44s %s\n", k.c_str(), v.to_string().c_str());
  }
  if (tensors) {
    std::printf("tensor table:\n");
    for (const auto& t : g.tensors()) {
      std::string shape;
      for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "x" : "") + std::to_string(t.shape[i]);
      std::printf("  %-36s %-6s %-16s %10zu bytes\n", t.name.c_str(),
                  std::string(dtype_name(t.dtype)).c_str(), shape.c_str(), t.nbytes);
    }
  }
  return 0;
}

Register reg({"info", "architecture, hyper-parameters, parameter count and tensors of a GGUF",
              info_main});

}  // namespace
}  // namespace nexus::cli
