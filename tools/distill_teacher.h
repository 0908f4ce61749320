// The teacher of `nexus distill` (cmd_train.cc): an inference model whose logits at every position
// of each micro-batch's windows are the soft targets. Its own file: the runtime's Batch and the
// training data's Batch share a name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nexus/status.h"

namespace nexus::cli {

class Teacher {
 public:
  // The model at `path`, which must have n_vocab tokens (the student's tokenizer); a context for
  // windows of `seq` tokens.
  static Result<std::unique_ptr<Teacher>> open(const std::string& path, int64_t n_vocab,
                                               int64_t seq, int threads);
  ~Teacher();
  // Logits [rows * seq, n_vocab] of `rows` windows of `seq` tokens (row-major), one window at a
  // time from position 0; valid until the next call. Throws nexus::Error when decoding fails.
  const float* logits(const int32_t* tokens, int rows, int seq);

 private:
  Teacher();
  struct State;
  std::unique_ptr<State> st_;
};

}  // namespace nexus::cli
