// The table of contents of the kernel layer: every op's signature, once. Each ISA implements
// some of them as extern "C" functions named ml_k_<op>_<isa> with exactly these signatures;
// the scalar ISA implements all of them and is the reference (kernels/scalar/).
//
// Rules for every kernel (spec/kernels.txt): any n and any row range [r0, r1); rows outside it
// untouched; unaligned loads; no allocation; no global state; integer block dots never saturate.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/pack.h"
#include "core/types.h"

extern "C" {
// y[r] = sum over blocks b of (int32 dot of W's and x's quants in b) * (d_w[r][b] * d_x[b]),
// for r in [r0, r1). W->cols == x->n, a multiple of 32.
typedef void ml_k_matvec_q8_fn(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1);
typedef void ml_k_matvec_q4_fn(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1);
// Q8_0 quantization of n floats (any n; a short last block): ml_quantize_q8_ref's rule, bit-exact.
typedef void ml_k_quantize_q8_fn(int8_t* q, float* d, const float* x, int n);
// o[i] = w[i] * (x[i] * (1 / sqrt(mean(x^2) + eps))). o may alias x.
typedef void ml_k_rmsnorm_fn(float* o, const float* x, const float* w, int n, float eps);
// In place: x = exp(x - max) / sum. Uniform 1/n when every input is -inf.
typedef void ml_k_softmax_fn(float* x, int n);
// g[i] = silu(g[i]) * u[i], silu(v) = v / (1 + exp(-v)).
typedef void ml_k_silu_mul_fn(float* g, const float* u, int n);
// g[i] = gelu(g[i]) * u[i], GELU's tanh approximation (GeGLU, Gemma), in ml_k_gelu_mul1's form.
typedef void ml_k_gelu_mul_fn(float* g, const float* u, int n);
// y[i] += x[i].
typedef void ml_k_add_fn(float* y, const float* x, int n);
// Rotates n_heads heads of head_dim values in place by the angles whose cos/sin are given
// ([head_dim / 2] each, one position). style 0: pairs (2i, 2i+1) (llama2.c / GGUF);
// style 1: pairs (i, i + head_dim/2) (Hugging Face rotate-half).
// Pair i: (a, b) -> (a*cos[i] - b*sin[i], a*sin[i] + b*cos[i]).
typedef void ml_k_rope_fn(float* x, int n_heads, int head_dim, const float* cos, const float* sin, int style);
// Attention over an F32 cache: s[j] = dot(q, K + j*k_stride) over head_dim values, j < n_rows.
typedef void ml_k_dot_f32_fn(float* s, const float* q, const float* K, size_t k_stride, int n_rows, int head_dim);
// out[i] += sum_j w[j] * V[j*v_stride + i], i < head_dim.
typedef void ml_k_axpy_f32_fn(float* out, const float* w, const float* V, size_t v_stride, int n_rows, int head_dim);
// Q8 cache: one scale per cached row. s[j] = (int32 dot(q, K_j)) * (qd * Kd[j*d_stride]).
typedef void ml_k_dot_q8_fn(float* s, const int8_t* q, float qd, const int8_t* K, const float* Kd, size_t k_stride,
                            size_t d_stride, int n_rows, int head_dim);
// out[i] += sum_j (w[j] * Vd[j*d_stride]) * V[j*v_stride + i].
typedef void ml_k_axpy_q8_fn(float* out, const float* w, const int8_t* V, const float* Vd, size_t v_stride,
                             size_t d_stride, int n_rows, int head_dim);
// F16 cache: rows of IEEE halves, widened on the fly; otherwise as the F32 pair.
typedef void ml_k_dot_f16_fn(float* s, const float* q, const uint16_t* K, size_t k_stride, int n_rows, int head_dim);
typedef void ml_k_axpy_f16_fn(float* out, const float* w, const uint16_t* V, size_t v_stride, int n_rows,
                              int head_dim);
// The F16 pair for the n_heads query heads of one KV group, each row widened once for them all:
// s[h * s_stride + j] = dot_f16's s[j] for q + h * q_stride; out + h * o_stride gets axpy_f16's
// sum with the weights w + h * w_stride. Bit-identical to one dot_f16 / axpy_f16 per head. Only
// ISAs that define ML_K_F16_HEADS bind them (ML_K_F16_HEADS_OPS); elsewhere attention calls the
// pair once per head.
typedef void ml_k_dot_f16_heads_fn(float* s, size_t s_stride, const float* q, size_t q_stride, int n_heads,
                                   const uint16_t* K, size_t k_stride, int n_rows, int head_dim);
typedef void ml_k_axpy_f16_heads_fn(float* out, size_t o_stride, const float* w, size_t w_stride, int n_heads,
                                    const uint16_t* V, size_t v_stride, int n_rows, int head_dim);
// dst[i] = src[i] as an IEEE half, as core/half.h's ml_float_to_half rounds it (to nearest even;
// at or beyond 65520 inf; every NaN sign | 0x7E00): what an F16 cache stores.
typedef void ml_k_f32_to_f16_fn(uint16_t* dst, const float* src, int n);

// Packed kernels (core/pack.h layout, the ISA's ml_pack_params). r0 is a multiple of the group
// size G; rows at or above r1 are never written.
// Matvec: y[r] as matvec_q8/q4 computes it (bit-exact with unit scales, 1e-5 of the term
// magnitudes otherwise).
typedef void ml_k_matvec_q8_pk_fn(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1);
typedef void ml_k_matvec_q4_pk_fn(float* y, const ml_qtensor* W, const ml_qact* x, int r0, int r1);
// Matmul over X->n_tokens tokens: Y[t * ldy + r] equals, bit for bit, that ISA's packed matvec of
// token t (same float operations in the same order).
typedef void ml_k_matmul_q8_pk_fn(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1);
typedef void ml_k_matmul_q4_pk_fn(float* Y, int ldy, const ml_qtensor* W, const ml_qbatch* X, int r0, int r1);
}

// X-macro over every op; drives the static checks in bind.h, the tests and ml_bench.
#define ML_K_OPS(X)                                                                                  \
  X(matvec_q8) X(matvec_q4) X(quantize_q8) X(rmsnorm) X(softmax) X(silu_mul) X(gelu_mul) X(add) X(rope) X(dot_f32) \
      X(axpy_f32) X(dot_q8) X(axpy_q8) X(dot_f16) X(axpy_f16) X(f32_to_f16)
// The grouped F16 attention ops; only ISAs that define ML_K_F16_HEADS bind them.
#define ML_K_F16_HEADS_OPS(X) X(dot_f16_heads) X(axpy_f16_heads)
// The packed ops; only ISAs that define ML_K_PACKED bind them.
#define ML_K_PK_OPS(X) X(matvec_q8_pk) X(matvec_q4_pk) X(matmul_q8_pk) X(matmul_q4_pk)

// Declares ml_k_<op>_<isa> and binds the short name <op> in the current ISA namespace, plus
// <op>_name for the "resolved to" lines. Use inside namespace ml::k::<isa>.
#define ML_K_BIND(op, isa)                                      \
  extern "C" ml_k_##op##_fn ml_k_##op##_##isa;                  \
  inline constexpr auto& op = ml_k_##op##_##isa;                \
  inline constexpr const char* op##_name = "ml_k_" #op "_" #isa;

// Binds a packed op in an ISA namespace that defines `pack` (its ml_pack_params), and records
// which layout the op reads (op##_pack), so bind.h can check that every packed op of the build
// reads the build's layout: an ISA that changes G must bind all four packed ops.
#define ML_K_BIND_PK(op, isa)   \
  ML_K_BIND(op, isa)            \
  inline constexpr const ml_pack_params& op##_pack = pack;
