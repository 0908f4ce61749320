// libFuzzer target for the GGUF reader: parse arbitrary bytes, touch every metadata value and every
// tensor byte, and check that a parsed file survives a write/read round trip unchanged.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "nexus/io/gguf.h"

namespace {

// Where the checksums of touched bytes go, so the compiler cannot skip the reads.
volatile uint64_t g_sink = 0;

// Aborts (so libFuzzer records a crash) with a message when an invariant does not hold.
void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_gguf: invariant violated: %s\n", what);
  std::abort();
}

// Reads every metadata value so ASan sees any bad pointer or length behind it.
uint64_t touch_metadata(const nexus::GgufFile& g) {
  uint64_t h = 0;
  for (const auto& [key, v] : g.metadata()) {
    h += key.size() + v.to_string().size() + v.s.size();
    for (const auto& s : v.as)
      for (char ch : s) h += static_cast<uint8_t>(ch);
    for (double f : v.af) h += f != 0.0;
    for (int64_t i : v.ai) h += static_cast<uint64_t>(i);
    require(g.find(key) == &v, "find() returns the stored value");
  }
  return h;
}

// Reads every tensor byte and checks the view lies inside the input.
uint64_t touch_tensors(const nexus::GgufFile& g, std::span<const uint8_t> in) {
  uint64_t h = 0;
  for (const auto& t : g.tensors()) {
    require(t.data >= in.data() && t.nbytes <= static_cast<size_t>(in.data() + in.size() - t.data),
            "tensor data inside the input");
    for (size_t i = 0; i < t.nbytes; ++i) h += t.data[i];
    const nexus::Tensor view = g.tensor(t);
    require(view.nbytes() == t.nbytes, "Tensor view has the tensor's byte size");
    require(g.find_tensor(t.name) == &t, "find_tensor() returns the stored tensor");
  }
  return h;
}

bool same_value(const nexus::GgufValue& a, const nexus::GgufValue& b) {
  if (a.type != b.type || a.i != b.i || a.u != b.u || a.s != b.s || a.as != b.as || a.ai != b.ai)
    return false;
  if (a.type == nexus::GgufType::kArray && a.array_type != b.array_type) return false;
  // Floats compare bit for bit (NaN payloads included).
  if (a.af.size() != b.af.size() || std::memcmp(&a.f, &b.f, sizeof(double)) != 0) return false;
  return a.af.empty() || std::memcmp(a.af.data(), b.af.data(), a.af.size() * sizeof(double)) == 0;
}

// Writing a parsed file and reading it back must give the same metadata and tensors.
void check_round_trip(const nexus::GgufFile& g) {
  nexus::GgufWriter w;
  w.copy_metadata(g);
  for (const auto& t : g.tensors()) w.add_tensor(t.name, t.dtype, t.shape, t.data);
  const std::vector<uint8_t> img = w.serialize();
  auto r = nexus::GgufFile::parse(img, nullptr, "round-trip");
  if (!r) std::fprintf(stderr, "fuzz_gguf: %s\n", r.status().message().c_str());
  require(r.is_ok(), "a written file parses");
  const nexus::GgufFile& g2 = r.value();
  require(g2.metadata().size() == g.metadata().size(), "metadata count survives");
  for (size_t i = 0; i < g.metadata().size(); ++i) {
    require(g2.metadata()[i].first == g.metadata()[i].first, "metadata key survives");
    require(same_value(g2.metadata()[i].second, g.metadata()[i].second), "metadata value survives");
  }
  require(g2.tensors().size() == g.tensors().size(), "tensor count survives");
  for (size_t i = 0; i < g.tensors().size(); ++i) {
    const auto& a = g.tensors()[i];
    const auto& b = g2.tensors()[i];
    require(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.nbytes == b.nbytes,
            "tensor info survives");
    require(std::memcmp(a.data, b.data, a.nbytes) == 0, "tensor bytes survive");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  auto r = nexus::GgufFile::parse(in, nullptr, "fuzz");
  if (!r) {
    // Every rejection names the file and the offset of the problem.
    require(r.status().message().rfind("gguf: fuzz: at offset ", 0) == 0,
            "error message starts with 'gguf: fuzz: at offset '");
    return 0;
  }
  g_sink = touch_metadata(r.value()) + touch_tensors(r.value(), in);
  check_round_trip(r.value());
  return 0;
}
