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
  bool linear = false;                      // a gated-delta (linear attention) layer (Qwen3.5)
  std::vector<double> attn_norm, ffn_norm;  // dim
  // Attention layers.
  RefMatrix wq, wk, wv, wo;                 // q: n_heads*head_dim x dim; k, v: kv_dim x dim; o: dim x q
  std::vector<double> bq, bk, bv;           // flags bit 0: q_dim, kv_dim, kv_dim (empty otherwise)
  std::vector<double> q_norm, k_norm;       // flags bit 1: head_dim
  RefMatrix wgate;                          // flags bit 4: attn_gate, q_dim x dim
  // Linear layers (ch = 2*nk*dk + nv*dv).
  RefMatrix wqkv;                           // ch x dim: q (nk*dk), k (nk*dk), v (nv*dv)
  RefMatrix wz;                             // attn_gate: nv*dv x dim
  RefMatrix wbeta, walpha;                  // ssm_beta, ssm_alpha: nv x dim
  RefMatrix conv;                           // ssm_conv1d: ch x K, tap K-1 on the newest input
  std::vector<double> ssm_a, ssm_dt;        // nv: A = -exp(A_log), dt_bias
  std::vector<double> ssm_norm;             // dv
  RefMatrix ssm_out;                        // dim x nv*dv
  // Both kinds.
  std::vector<double> post_attn_norm, post_ffn_norm;  // flags bit 2: dim
  RefMatrix w1, w3, w2;                     // gate, up: hidden x dim; down: dim x hidden
};

struct RefModel {
  std::string kind;        // "mlb" or "llama2c", for messages
  bool quantized = false;  // .mlb: every matvec input goes through the Q8 activation rule
  uint32_t arch = 0;       // .mlb arch (0 llama, 1 qwen2, 2 qwen3, 3 gemma3, 4 qwen3.5); informational
  uint32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  uint32_t vocab = 0, max_seq = 0;
  uint32_t rope_type = 0;  // 0 pairs (2i, 2i+1); 1 pairs (i, i + n_rot/2), within the first n_rot dims
  uint32_t n_rot = 0;      // rotated dims per head, resolved (never 0 once a reader has filled it)
  double norm_eps = 1e-5, rope_theta = 10000.0, embed_scale = 1.0;
  double rope_local_theta = 0.0;  // sliding layers' base; 0 = the global table (rope_theta, scaled)
  uint32_t rope_scaling = 0;      // 0 none, 1 llama3, 2 linear (of the rope_theta table only)
  double rope_factor = 1.0, rope_low_freq_factor = 1.0, rope_high_freq_factor = 1.0;
  uint32_t rope_orig_max_seq = 0;
  double attn_scale = 0.0;        // 0 = 1/sqrt(head_dim)
  double logit_softcap = 0.0;     // 0 none
  uint32_t activation = 0;        // 0 SiLU, 1 GELU (tanh)
  uint32_t sliding_window = 0, sliding_pattern = 0;
  bool qkv_bias = false, qk_norm = false, post_norms = false, attn_gate = false;  // flags bits 0, 1, 2, 4
  uint32_t linear_period = 0, linear_k_heads = 0, linear_v_heads = 0, linear_k_dim = 0, linear_v_dim = 0;
  uint32_t linear_conv = 0;
  RefMatrix tok_embd;                  // vocab x dim
  std::vector<RefLayer> layers;
  std::vector<double> output_norm;     // dim
  bool tied = false;                   // classifier = tok_embd
  RefMatrix output;                    // vocab x dim, empty when tied
  const RefMatrix& classifier() const { return tied ? tok_embd : output; }
  // Layer l is a gated-delta layer unless l % linear_period == linear_period - 1.
  bool is_linear(uint32_t l) const { return linear_period > 0 && l % linear_period != linear_period - 1; }
  // Layer l attends to the last sliding_window positions only (and rotates with the local base).
  bool is_sliding(uint32_t l) const {
    return sliding_window > 0 && !(sliding_pattern > 0 && l % sliding_pattern == sliding_pattern - 1);
  }
};

// Reads a whole file; throws RefError(1, ...) naming the path when it cannot.
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace ref
