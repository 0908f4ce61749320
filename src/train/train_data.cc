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

Result<TokenFile> open_training_data(const std::string& path, const Tokenizer& tokenizer) {
  if (is_token_file(path)) return TokenFile::open(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot read --data " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  // Moved out, not copied: str() on an lvalue copies the whole corpus (twice before, once for the
  // check below and once for encode).
  const std::string text = std::move(buffer).str();
  // (encode adds BOS, so an empty text would still give a token.)
  if (text.empty()) return Status::error("--data " + path + " holds no text (0 bytes)");
  const std::vector<int32_t> ids = tokenizer.encode(text, true);
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
  if (file) file.value().rename_for_messages(path);  // not the removed temporary's name
  return file;
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
