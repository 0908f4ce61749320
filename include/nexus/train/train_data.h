// The trainer's data files: --data as an NXTK token file (or raw text, tokenized into a private
// temporary token file), the default validation sibling, and the vocabulary checks.
#pragma once

#include <cstdint>
#include <string>

#include "nexus/status.h"
#include "nexus/tokenizer.h"
#include "nexus/train/token_file.h"

namespace nexus::train {

// True when `path` starts with the token-file magic "NXTK".
bool is_token_file(const std::string& path);

// A token file as is, or any other file read as UTF-8 text and encoded (with BOS, as
// Tokenizer::encode adds it) into an unlinked temporary token file; errors name the path.
Result<TokenFile> open_training_data(const std::string& path, const Tokenizer& tokenizer);

// "data.bin" -> "data.val.bin"; other names get ".val" appended (as tokenize-data writes them).
std::string val_path_for(const std::string& data_path);

// The file must have been tokenized with `tokenizer` (same tokenizer_fingerprint()) and every id
// must be below the model's vocabulary `model_vocab`; the error names the file (`name`, the path
// the user gave: raw text lives in a temporary token file) and the fault.
Status check_vocabulary(const TokenFile& file, const Tokenizer& tokenizer, int64_t model_vocab,
                        const std::string& name);

}  // namespace nexus::train
