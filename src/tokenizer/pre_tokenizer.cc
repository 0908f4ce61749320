// The named pre-tokenizer configurations (patterns as the models' tokenizer.json files write them)
// and the Isolated splitting loop.
#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace nexus::tok {

namespace {

// GPT-2's pattern as llama.cpp lists it. Hugging Face's ByteLevel pre-tokenizer appends "|\s+",
// which splits identically: whitespace this pattern leaves unmatched becomes a gap piece anyway.
constexpr const char* kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
constexpr const char* kGpt2Hf =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
constexpr const char* kLlama3 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kQwen2 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kQwen35 =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kSeedCoder =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kTekken =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kDeepseekV3 =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// DeepSeek LLM's letter class (the cased-letter ranges its tokenizer.json spells out), written
// with escapes: several of its characters are canonical singletons that editors may normalize.
constexpr const char* kDeepseekLetters =
    "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}"
    "\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}"
    "\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-"
    "\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-"
    "\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
    "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-"
    "\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}"
    "\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}"
    "\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}"
    "\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-"
    "\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}"
    "\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}"
    "\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}"
    "\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+";
constexpr const char* kCjk = R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";
constexpr const char* kBloom =
    R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)re";

struct Config {
  std::vector<std::string> names;
  std::vector<std::string> patterns;
  bool ignore_merges = false;
  bool add_bos = false;
};

const std::vector<Config>& configs() {
  static const std::vector<Config> kConfigs = {
      {{"gpt-2",        "gpt2",
        "gpt-neox",     "mpt",
        "olmo",         "phi-2",
        "jais",         "jina-es",
        "jina-de",      "jina-v2-es",
        "jina-v2-de",   "gigachat",
        "trillion",     "granite-docling",
        "exaone4",      "modern-bert",
        "roberta-bpe",  "jina-v1-en",
        "jina-v2-code", "a.x-4.0",
        "mellum"},
       {kGpt2}},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {kLlama3},
       true,
       true},
      {{"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"}, {kLlama3}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan", "kormo"}, {kQwen2}},
      {{"qwen35"}, {kQwen35}},
      {{"deepseek-llm"},
       {"[\r\n]", kDeepseekLetters,
        R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re",
        "\\s+$", kCjk, "\\p{N}+"}},
      {{"deepseek-coder"}, {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"}},
      {{"deepseek-v3", "hunyuan-dense"},
       {"\\p{N}{1,3}", R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re",
        kDeepseekV3}},
      {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {"\\p{N}", kGpt2}},
      {{"default"}, {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}},
      {{"viking"}, {kBloom, "\\p{N}"}},
      {{"tekken"}, {kTekken}, true, true},
      {{"gpt-4o", "llama4"}, {kGpt4o}},
      {{"seed-coder"}, {kSeedCoder}},
  };
  return kConfigs;
}

// Splits cps[b, e) by `re` into matches and gaps, appending code-point ranges to `out`.
void split_isolated(const Regex& re, std::span<const char32_t> cps, Piece range,
                    std::vector<Piece>* out) {
  const std::span<const char32_t> sub = cps.subspan(range.begin, range.end - range.begin);
  const size_t n = sub.size();
  auto emit = [&](size_t a, size_t b) {
    if (b > a)
      out->push_back(
          {static_cast<uint32_t>(range.begin + a), static_cast<uint32_t>(range.begin + b)});
  };
  size_t gap = 0, pos = 0, mb = 0, me = 0;
  while (pos <= n && re.find(sub, pos, &mb, &me)) {
    emit(gap, mb);
    if (me == mb) {
      // An empty match is only a split point; resume one character later.
      gap = mb;
      pos = mb + 1;
      continue;
    }
    emit(mb, me);
    gap = pos = me;
  }
  emit(gap, n);
}

}  // namespace

Result<PreTokenizer> PreTokenizer::from_patterns(std::string name,
                                                 std::vector<std::string> patterns) {
  PreTokenizer p;
  p.name_ = std::move(name);
  for (const std::string& pat : patterns) {
    auto re = Regex::compile(pat);
    if (!re) return re.status();
    p.regexes_.push_back(std::move(re.value()));
  }
  return p;
}

Result<PreTokenizer> PreTokenizer::from_name(std::string_view name) {
  for (const Config& c : configs()) {
    if (std::find(c.names.begin(), c.names.end(), name) == c.names.end()) continue;
    auto p = from_patterns(std::string(name), c.patterns);
    if (!p) return p.status();
    p->ignore_merges_ = c.ignore_merges;
    p->add_bos_ = c.add_bos;
    return p;
  }
  return Status::error("unknown pre-tokenizer '" + std::string(name) + "'");
}

std::string PreTokenizer::identify(std::span<const std::string> patterns) {
  if (patterns.size() == 1 && patterns[0] == kGpt2Hf) return "gpt-2";
  for (const Config& c : configs())
    if (std::equal(patterns.begin(), patterns.end(), c.patterns.begin(), c.patterns.end()))
      return c.names[0];
  return "";
}

std::vector<std::string> PreTokenizer::known_names() {
  std::vector<std::string> names;
  for (const Config& c : configs()) names.insert(names.end(), c.names.begin(), c.names.end());
  return names;
}

void PreTokenizer::split(std::string_view text, std::vector<Piece>* pieces) const {
  if (text.empty()) return;
  const CodePoints cp = decode_all(text);
  std::vector<Piece> cur{{0, static_cast<uint32_t>(cp.cps.size())}}, next;
  for (const Regex& re : regexes_) {
    next.clear();
    for (const Piece& p : cur) split_isolated(re, cp.cps, p, &next);
    cur.swap(next);
  }
  for (const Piece& p : cur) pieces->push_back({cp.offsets[p.begin], cp.offsets[p.end]});
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<Piece> pieces;
  split(text, &pieces);
  std::vector<std::string> out;
  for (const Piece& p : pieces) out.emplace_back(text.substr(p.begin, p.end - p.begin));
  return out;
}

}  // namespace nexus::tok
