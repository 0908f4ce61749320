// The trainer's data files: --data as an NXTK token file (or raw text, tokenized into a private
// temporary token file), the default validation sibling, and the vocabulary checks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "nexus/status.h"
#include "nexus/tokenizer.h"
#include "nexus/train/data_loader.h"
#include "nexus/train/token_file.h"

namespace nexus::train {

// True when `path` starts with the token-file magic "NXTK".
bool is_token_file(const std::string& path);

// How the data is cut into samples (train --documents, --loss-after).
struct DataOptions {
  bool documents = false;  // each line of a text file (or BOS-led run of a token file) a sample
  std::string loss_after;  // non-empty (implies documents): train only on what follows its last
                           // occurrence in each line
};

struct TrainingData {
  TokenFile file;
  std::optional<Documents> documents;  // set with DataOptions::documents
};

// A token file as is, or any other file read as UTF-8 text and encoded (with BOS, as
// Tokenizer::encode adds it) into an unlinked temporary token file; errors name the path.
// With documents each non-empty line of a text file is encoded alone (with BOS), and a line
// without `loss_after`, or with nothing after it, is an error naming the line.
Result<TrainingData> open_training_data(const std::string& path, const Tokenizer& tokenizer,
                                        const DataOptions& options = {});

// "data.bin" -> "data.val.bin"; other names get ".val" appended (as tokenize-data writes them).
std::string val_path_for(const std::string& data_path);

// The file must have been tokenized with `tokenizer` (same tokenizer_fingerprint()) and every id
// must be below the model's vocabulary `model_vocab`; the error names the file (`name`, the path
// the user gave: raw text lives in a temporary token file) and the fault.
Status check_vocabulary(const TokenFile& file, const Tokenizer& tokenizer, int64_t model_vocab,
                        const std::string& name);

}  // namespace nexus::train
