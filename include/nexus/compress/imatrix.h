// Importance matrices (`nexus imatrix`, `nexus quantize --imatrix`): per weight matrix, the sum of
// the squares of each input column's activations over a calibration text, in llama.cpp's imatrix
// GGUF format (general.type "imatrix"; NAME.in_sum2 and NAME.counts per weight), so a file made
// by either tool works in the other.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "nexus/model.h"
#include "nexus/status.h"
#include "nexus/tokenizer.h"

namespace nexus {

struct ImatrixEntry {
  std::vector<float> sum2;  // per input column: the sum over tokens of x^2
  int64_t count = 0;        // the tokens summed
};

struct Imatrix {
  std::map<std::string, ImatrixEntry> entries;  // by weight name ("blk.0.attn_q.weight")
  std::vector<std::string> datasets;            // the calibration files
  int64_t chunk_count = 0, chunk_size = 0;
  // The importance of each input column of weight `name` (sum2 / count), or empty when the
  // matrix has no entry.
  std::vector<float> importance(const std::string& name) const;
};

struct ImatrixOptions {
  int64_t n_ctx = 512;          // tokens per chunk (the first is the BOS where the model has one)
  int64_t chunks = -1;          // at most this many chunks (-1: the whole text)
  int n_threads = 1;
  bool include_output = false;  // also the output head (llama-imatrix's --process-output)
  std::string dataset;          // recorded in imatrix.datasets
};

// Runs the model over `text` in chunks and sums every weight matrix's squared input activations;
// `progress(done, total)` after each chunk. Errors: a text shorter than two chunks' worth of
// nothing (fewer than n_ctx tokens), a bad context size.
Result<Imatrix> collect_imatrix(const Model& model, const Tokenizer& tok, std::string_view text,
                                const ImatrixOptions& o,
                                const std::function<void(int64_t, int64_t)>& progress);

// The GGUF file (written atomically), and back; read errors name the file and the problem (not an
// imatrix, a tensor without its pair, mismatched sizes).
Status write_imatrix(const Imatrix& m, const std::string& path);
Result<Imatrix> read_imatrix(const std::string& path);

}  // namespace nexus
