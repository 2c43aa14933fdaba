// ref_forward's in-memory model: every weight already widened to double, row-major.
// Contract: the readers (mlb_reader, llama2c_reader) fill a RefModel completely or throw
// RefError; forward.cpp only reads it. Nothing here is shared with src/: this is the
// independent oracle, written from docs/format.md and llama2.c's export.py.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ref {

// An error with the process exit code it maps to: 1 the file could not be read or written,
// 2 bad input (malformed model file, bad option or token id).
struct RefError : std::runtime_error {
  int exit_code;
  RefError(int code, const std::string& msg) : std::runtime_error(msg), exit_code(code) {}
};

struct RefMatrix {
  uint32_t rows = 0, cols = 0;
  std::vector<double> data;  // rows * cols, row-major
};

struct RefLayer {
  std::vector<double> attn_norm, ffn_norm;  // dim
  RefMatrix wq, wk, wv, wo;                 // q: n_heads*head_dim x dim; k, v: kv_dim x dim; o: dim x q
  RefMatrix w1, w3, w2;                     // gate, up: hidden x dim; down: dim x hidden
};

struct RefModel {
  std::string kind;        // "mlb" or "llama2c", for messages
  bool quantized = false;  // .mlb: every matvec input goes through the Q8 activation rule
  uint32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  uint32_t vocab = 0, max_seq = 0;
  uint32_t rope_type = 0;  // 0 pairs (2i, 2i+1); 1 pairs (i, i + head_dim/2)
  double norm_eps = 1e-5, rope_theta = 10000.0, embed_scale = 1.0;
  RefMatrix tok_embd;                  // vocab x dim
  std::vector<RefLayer> layers;
  std::vector<double> output_norm;     // dim
  bool tied = false;                   // classifier = tok_embd
  RefMatrix output;                    // vocab x dim, empty when tied
  const RefMatrix& classifier() const { return tied ? tok_embd : output; }
};

// Reads a whole file; throws RefError(1, ...) naming the path when it cannot.
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace ref
