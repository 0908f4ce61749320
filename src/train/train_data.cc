// Opening training data (token file or raw text) and checking it against the model's vocabulary.
#include "nexus/train/train_data.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace nexus::train {

bool is_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string_view(magic, 4) == "NXTK";
}

namespace {

// The token offset at which `line`'s tokens after its last `loss_after` start: where its encoding
// first differs from (or runs past) the encoding of the line up to and including `loss_after`.
Result<size_t> loss_start(const Tokenizer& tokenizer, std::string_view line,
                          const std::vector<int32_t>& ids, const std::string& loss_after,
                          size_t line_no, const std::string& path) {
  const size_t at = line.rfind(loss_after);
  if (at == std::string_view::npos)
    return Status::error("--data " + path + ": line " + std::to_string(line_no) + " holds no '" +
                         loss_after + "' (--loss-after)");
  const std::vector<int32_t> head = tokenizer.encode(line.substr(0, at + loss_after.size()), true);
  size_t k = 0;
  while (k < head.size() && k < ids.size() && head[k] == ids[k]) ++k;
  if (k >= ids.size())
    return Status::error("--data " + path + ": line " + std::to_string(line_no) +
                         " has nothing after its last '" + loss_after + "' (--loss-after)");
  return k;
}

// Each non-empty line encoded alone, with its document bounds.
Status encode_lines(const std::string& text, const Tokenizer& tokenizer, const DataOptions& o,
                    const std::string& path, std::vector<int32_t>& ids, Documents& docs) {
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string_view line(text.data() + pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::vector<int32_t> line_ids = tokenizer.encode(line, true);
    if (line_ids.size() < 2) continue;
    size_t first = 1;
    if (!o.loss_after.empty()) {
      auto k = loss_start(tokenizer, line, line_ids, o.loss_after, line_no, path);
      if (!k) return k.status();
      first = k.value();
    }
    docs.begin.push_back(ids.size());
    docs.loss_from.push_back(ids.size() + first);
    ids.insert(ids.end(), line_ids.begin(), line_ids.end());
    docs.end.push_back(ids.size());
  }
  return Status::ok();
}

// A token file's documents: the runs that start at a BOS token (and the file's start).
Documents split_at_bos(const TokenFile& file, int32_t bos) {
  Documents docs;
  uint64_t begin = 0;
  const auto add = [&](uint64_t end) {
    if (end - begin >= 2) {
      docs.begin.push_back(begin);
      docs.end.push_back(end);
      docs.loss_from.push_back(begin + 1);
    }
    begin = end;
  };
  for (uint64_t i = 1; i < file.size(); ++i)
    if (file[i] == bos) add(i);
  add(file.size());
  return docs;
}

}  // namespace

Result<TrainingData> open_training_data(const std::string& path, const Tokenizer& tokenizer,
                                        const DataOptions& options) {
  const bool documents = options.documents || !options.loss_after.empty();
  if (is_token_file(path)) {
    if (!options.loss_after.empty())
      return Status::error("--loss-after needs text --data (" + path +
                           " is a token file, its lines are gone)");
    auto file = TokenFile::open(path);
    if (!file) return file.status();
    TrainingData data{std::move(file).value(), std::nullopt};
    if (documents) {
      if (tokenizer.bos_id() < 0)
        return Status::error(
            "--documents on a token file splits it at BOS, which the "
            "tokenizer does not have; give text --data");
      data.documents = split_at_bos(data.file, tokenizer.bos_id());
    }
    return data;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot read --data " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  // Moved out, not copied: str() on an lvalue copies the whole corpus (twice before, once for the
  // check below and once for encode).
  const std::string text = std::move(buffer).str();
  // (encode adds BOS, so an empty text would still give a token.)
  if (text.empty()) return Status::error("--data " + path + " holds no text (0 bytes)");
  std::vector<int32_t> ids;
  std::optional<Documents> docs;
  if (documents) {
    docs.emplace();
    NEXUS_RETURN_IF_ERROR(encode_lines(text, tokenizer, options, path, ids, *docs));
    if (docs->size() == 0)
      return Status::error("--data " + path + " holds no line of 2 or more tokens");
  } else {
    ids = tokenizer.encode(text, true);
  }
  static int counter = 0;
  const std::string tmp =
      (std::filesystem::temp_directory_path() /
       ("nexus-train-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".bin"))
          .string();
  auto w = TokenFileWriter::create(tmp, static_cast<uint64_t>(tokenizer.n_vocab()),
                                   tokenizer_fingerprint(tokenizer), tokenizer.eos_id());
  if (!w) return w.status();
  NEXUS_RETURN_IF_ERROR(w.value()->append(ids));
  NEXUS_RETURN_IF_ERROR(w.value()->finish());
  auto file = TokenFile::open(tmp);
  std::filesystem::remove(tmp);  // the mapping keeps the data
  if (!file) return file.status();
  file.value().rename_for_messages(path);  // not the removed temporary's name
  return TrainingData{std::move(file).value(), std::move(docs)};
}

std::string val_path_for(const std::string& data_path) {
  const std::string ext = ".bin";
  if (data_path.size() > ext.size() &&
      data_path.compare(data_path.size() - ext.size(), ext.size(), ext) == 0)
    return data_path.substr(0, data_path.size() - ext.size()) + ".val.bin";
  return data_path + ".val";
}

Status check_vocabulary(const TokenFile& file, const Tokenizer& tokenizer, int64_t model_vocab,
                        const std::string& name) {
  const uint64_t want = tokenizer_fingerprint(tokenizer);
  if (file.header().tokenizer_hash != want) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  " (vocab %llu, fingerprint %016llx) than the model's tokenizer (vocab %lld, "
                  "fingerprint %016llx)",
                  static_cast<unsigned long long>(file.vocab_size()),
                  static_cast<unsigned long long>(file.header().tokenizer_hash),
                  static_cast<long long>(tokenizer.n_vocab()),
                  static_cast<unsigned long long>(want));
    return Status::error(name + " was tokenized with a different vocabulary" + buf +
                         "; re-run nexus tokenize-data with the model's tokenizer");
  }
  if (file.vocab_size() > static_cast<uint64_t>(model_vocab))
    for (uint64_t i = 0; i < file.size(); ++i)
      if (file[i] >= model_vocab)
        return Status::error(name + ": token " + std::to_string(i) + " has id " +
                             std::to_string(file[i]) + ", outside the model's vocabulary of " +
                             std::to_string(model_vocab));
  return Status::ok();
}

}  // namespace nexus::train
