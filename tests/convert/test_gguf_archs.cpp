// The GGUF importer per architecture (convert/gguf_import.cpp, gguf_qwen35.cpp): qwen2, qwen3 and
// gemma3 headers, Llama 3's rope_freqs, K-quant requantization and Qwen3.5 (q/gate split, value
// heads regrouped, MTP layers, damaged files), on files written by gguf_fixture.h. Oracles as in
// test_gguf.cpp.
#include "gguf_fixture.h"  // Catch2, the converter, the .mlb reader, test_util.h

using namespace gguf_test;

namespace {

// base() renamed to another architecture, with its extra tensors.
gguf as_arch(const std::string& arch) {
  gguf g = base(GGUF_T_F16, 11);
  for (auto& k : g.kvs) {
    if (k.key.rfind("llama.", 0) == 0) k.key = arch + "." + k.key.substr(6);
  }
  *g.find("general.architecture") = kv_str("general.architecture", arch);
  std::mt19937 rng(5);
  auto vec = [&](const std::string& n, uint64_t k) {
    g.ts.push_back({n, {k}, GGUF_T_F32, rand_bytes(GGUF_T_F32, 1, k, rng)});
  };
  if (arch == "qwen2")
    for (const char* x : {"q", "k", "v"}) vec(std::string("blk.0.attn_") + x + ".bias", kDim);
  if (arch == "qwen3" || arch == "gemma3") vec("blk.0.attn_q_norm.weight", kDim), vec("blk.0.attn_k_norm.weight", kDim);
  if (arch == "gemma3") {
    vec("blk.0.post_attention_norm.weight", kDim), vec("blk.0.post_ffw_norm.weight", kDim);
    g.kvs.push_back(kv_u32("gemma3.attention.sliding_window", 512));
  }
  return g;
}

}  // namespace

TEST_CASE("gguf: qwen2, qwen3 and gemma3 headers follow llama.cpp's conventions", "[gguf]") {
  ml_test_dir d;
  {
    const result r = convert(d, as_arch("qwen2").build());
    REQUIRE(r.s == ML_OK);
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.arch == (uint32_t)ML_ARCH_QWEN2);
    CHECK(f.m.h.rope_type == (uint32_t)ML_ROPE_HALF);
    CHECK(f.m.h.flags == (ML_FLAG_QKV_BIAS | ML_FLAG_TIED_CLASSIFIER));
    CHECK(f.get("blk.0.attn_k.bias").cols == kDim);
  }
  {
    const result r = convert(d, as_arch("qwen3").build());
    REQUIRE(r.s == ML_OK);
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.arch == (uint32_t)ML_ARCH_QWEN3);
    CHECK(f.m.h.rope_type == (uint32_t)ML_ROPE_HALF);
    CHECK(f.m.h.flags == (ML_FLAG_QK_NORM | ML_FLAG_TIED_CLASSIFIER));
    CHECK(f.get("blk.0.attn_q_norm").cols == kDim);
  }
  {
    gguf g = as_arch("gemma3");
    g.kvs.push_back(kv_f32("gemma3.rope.freq_base", 1e6f));
    const result r = convert(d, g.build());
    REQUIRE(r.s == ML_OK);
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.arch == (uint32_t)ML_ARCH_GEMMA3);
    CHECK(f.m.h.flags == (ML_FLAG_QK_NORM | ML_FLAG_POST_NORMS | ML_FLAG_TIED_CLASSIFIER));
    CHECK(f.m.h.activation == (uint32_t)ML_ACT_GELU_TANH);
    CHECK(f.m.h.embed_scale == Approx(std::sqrt(32.0)));
    CHECK(f.m.h.sliding_window == 512);
    CHECK(f.m.h.sliding_pattern == 6);
    CHECK(f.m.h.rope_theta == 1e6f);
    CHECK(f.m.h.rope_local_theta == 10000.0f);
    // Norms are copied as they are (GGUF holds Gemma's 1 + w already).
    const ml_mlb_tensor t = f.get("blk.0.post_ffw_norm");
    CHECK(f.data(t) == g.tensor_named("blk.0.post_ffw_norm.weight")->data);
  }
  // A qwen3 file without its q/k norms is refused naming the tensor.
  gguf g = as_arch("qwen3");
  g.erase_tensor("blk.0.attn_k_norm.weight");
  const result r = convert(d, g.build());
  CHECK(r.s == ML_E_FORMAT);
  CHECK(contains(r.msg, "blk.0.attn_k_norm.weight is missing"));
}

TEST_CASE("gguf: Llama 3's rope_freqs.weight becomes the llama3 RoPE scaling", "[gguf]") {
  // The divisors as Meta's reference computes them (factor 32, low 1, high 4, original 8192).
  auto freqs = [](double factor, double theta) {
    std::vector<uint8_t> out;
    for (int i = 0; i < 16; ++i) {
      const double wavelen = 2 * M_PI * std::pow(theta, 2.0 * i / 32);
      double v;
      if (wavelen < 8192 / 4.0) v = 1;
      else if (wavelen > 8192 / 1.0) v = factor;
      else {
        const double smooth = (8192 / wavelen - 1) / (4 - 1);
        v = 1 / ((1 - smooth) / factor + smooth);
      }
      const float f = (float)v;
      out.insert(out.end(), (const uint8_t*)&f, (const uint8_t*)&f + 4);
    }
    return out;
  };
  ml_test_dir d;
  gguf g = base();
  g.kvs.push_back(kv_f32("llama.rope.freq_base", 500000.0f));
  g.ts.push_back({"rope_freqs.weight", {16}, GGUF_T_F32, freqs(32, 500000)});
  REQUIRE(convert(d, g.build()).s == ML_OK);
  mlb_file f(d / "out.mlb");
  CHECK(f.m.h.rope_scaling == (uint32_t)ML_ROPE_SCALING_LLAMA3);
  CHECK(f.m.h.rope_factor == 32.0f);
  CHECK(f.m.h.rope_low_freq_factor == 1.0f);
  CHECK(f.m.h.rope_high_freq_factor == 4.0f);
  CHECK(f.m.h.rope_orig_max_seq == 8192);
  CHECK(f.m.h.rope_theta == 500000.0f);
  // Divisors that no (factor, 1, 4, 8192) reproduces are refused naming the tensor.
  std::vector<uint8_t> bad = freqs(32, 500000);
  const float two = 2.0f;
  std::memcpy(bad.data(), &two, 4);
  g.tensor_named("rope_freqs.weight")->data = bad;
  const result r = convert(d, g.build());
  CHECK(r.s == ML_E_FORMAT);
  CHECK(contains(r.msg, "rope_freqs.weight: divisor 0"));
}

TEST_CASE("gguf: K-quant matrices are decoded and requantized with the Q8 rule, with a warning", "[gguf]") {
  // A 256-wide embedding (vocab 8) in Q6_K inside a model whose other matrices are F32 is not
  // possible with dim 32, so the embedding is the only tensor tested: a dim-256 model.
  std::mt19937 rng(9);
  gguf g;
  const uint64_t D = 256, V = 8;
  g.kvs = {kv_str("general.architecture", "llama"), kv_u32("llama.embedding_length", D),
           kv_u32("llama.block_count", 1), kv_u32("llama.feed_forward_length", 32),
           kv_u32("llama.attention.head_count", 8), kv_u32("llama.context_length", 16),
           kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)};
  std::vector<uint8_t> emb(V * 210);
  for (auto& b : emb) b = (uint8_t)rng();
  for (uint64_t r = 0; r < V; ++r) {  // a sane f16 d per block
    const uint16_t h = ml_float_to_half(0.01f);
    emb[r * 210 + 208] = (uint8_t)h, emb[r * 210 + 209] = (uint8_t)(h >> 8);
  }
  g.ts.push_back({"token_embd.weight", {D, V}, GGUF_T_Q6_K, emb});
  auto add = [&](const std::string& n, std::vector<uint64_t> ne) {
    uint64_t c = 1;
    for (auto x : ne) c *= x;
    g.ts.push_back({n, ne, GGUF_T_F32, rand_bytes(GGUF_T_F32, 1, c, rng)});
  };
  add("blk.0.attn_norm.weight", {D});
  for (const char* x : {"attn_q", "attn_k", "attn_v", "attn_output"}) add(std::string("blk.0.") + x + ".weight", {D, D});
  add("blk.0.ffn_norm.weight", {D});
  add("blk.0.ffn_gate.weight", {D, 32});
  add("blk.0.ffn_up.weight", {D, 32});
  add("blk.0.ffn_down.weight", {32, D});
  add("output_norm.weight", {D});
  ml_test_dir d;
  const result r = convert(d, g.build());
  REQUIRE(r.s == ML_OK);
  CHECK(contains(r.warn, "1 tensor decoded and requantized to Q8"));
  CHECK(contains(r.warn, "token_embd.weight (Q6_K)"));
  mlb_file f(d / "out.mlb");
  const ml_mlb_tensor t = f.get("tok_embd");
  const std::vector<uint8_t> q = f.data(t), s = f.scales(t);
  std::vector<float> x(V * D);
  REQUIRE(cv_gguf_dequant(GGUF_T_Q6_K, emb.data(), V * D, x.data()));
  // The oracle: docs/format.md's Q8 rule, d = amax/127, q = trunc(x*127/amax + copysign(0.5, x)),
  // the scale then rounded to f16.
  for (size_t b = 0; b < V * D / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
    CHECK((uint16_t)(s[2 * b] | s[2 * b + 1] << 8) == ml_float_to_half(amax / 127.0f));
    for (int j = 0; j < 32; ++j) {
      const float v = x[32 * b + j];
      const int want = amax == 0 ? 0 : (int)(v * (127.0f / amax) + std::copysign(0.5f, v));
      INFO("block " << b << " element " << j);
      CHECK((int8_t)q[32 * b + j] == want);
    }
  }
}

namespace {

// Qwen3.5 as llama.cpp's converter writes it (conversion/qwen.py, llama.cpp's qwen35 loader): a
// gated-delta layer 0 and an attention layer 1 (full_attention_interval 2), dim 32, hidden 64,
// vocab 8, tied. The attention layer: 2 heads of 16 (8 rotated), 1 KV head, attn_q holding per
// head the query rows then the gate rows. The gated-delta layer: nk key heads and nv value heads,
// both 32 wide, a kernel of 4. Matrices are Q8_0 (copied bit for bit), the rest F32. The test's
// oracle is the .mlb's layout: `want` holds each .mlb tensor's data (Q8_0 blocks or F32 bytes),
// and the file is built from it as the converter does (value heads grouped by key head ->
// tiled, q and gate interleaved per head).
constexpr uint32_t kQ35Heads = 2, kQ35Hd = 16, kQ35Dv = 32, kQ35Conv = 4, kQ35Rot = 8;

// The converter's _reorder_v_heads: in each of `outer` equal slices, the units [n_before,
// n_before + nv * width) seen as [nk, nv/nk, width] are transposed to [nv/nk, nk, width].
std::vector<uint8_t> tile(const std::vector<uint8_t>& x, size_t outer, size_t unit, size_t n_before, size_t width,
                          uint32_t nk, uint32_t nv) {
  std::vector<uint8_t> y = x;
  const size_t per = nv / nk, slice = x.size() / outer;
  for (size_t o = 0; o < outer; ++o)
    for (size_t kh = 0; kh < nk; ++kh)
      for (size_t j = 0; j < per; ++j)
        std::memcpy(y.data() + o * slice + (n_before + (j * nk + kh) * width) * unit,
                    x.data() + o * slice + (n_before + (kh * per + j) * width) * unit, width * unit);
  return y;
}

struct q35_file {
  gguf file;
  std::map<std::string, std::vector<uint8_t>> want;  // .mlb tensor -> its data
};

q35_file qwen35(uint32_t nk, uint32_t nv) {
  std::mt19937 rng(17);
  q35_file q;
  gguf& g = q.file;
  const uint32_t dv = kQ35Dv, ch = 2 * nk * kQ35Dv + nv * dv, qd = kQ35Heads * kQ35Hd;
  g.kvs = {kv_str("general.architecture", "qwen35"),
           kv_u32("qwen35.embedding_length", kDim),
           kv_u32("qwen35.block_count", 2),
           kv_u32("qwen35.feed_forward_length", kHidden),
           kv_u32("qwen35.attention.head_count", kQ35Heads),
           kv_u32("qwen35.attention.head_count_kv", 1),
           kv_u32("qwen35.attention.key_length", kQ35Hd),
           kv_u32("qwen35.attention.value_length", kQ35Hd),
           kv_u32("qwen35.context_length", 64),
           kv_f32("qwen35.attention.layer_norm_rms_epsilon", 1e-6f),
           kv_f32("qwen35.rope.freq_base", 1e7f),
           kv_u32("qwen35.rope.dimension_count", kQ35Rot),
           kv_i32s("qwen35.rope.dimension_sections", {2, 1, 1, 0}),
           kv_u32("qwen35.ssm.conv_kernel", kQ35Conv),
           kv_u32("qwen35.ssm.state_size", kQ35Dv),
           kv_u32("qwen35.ssm.group_count", nk),
           kv_u32("qwen35.ssm.time_step_rank", nv),
           kv_u32("qwen35.ssm.inner_size", nv * dv),
           kv_u32("qwen35.full_attention_interval", 2)};
  const size_t row = kDim / 32 * 34;  // bytes of a Q8_0 row of dim values
  auto q8 = [&](uint64_t rows, uint64_t cols) { return rand_bytes(GGUF_T_Q8_0, rows, cols, rng); };
  auto put = [&](const std::string& gname, std::vector<uint64_t> ne, uint32_t type, std::vector<uint8_t> d) {
    g.ts.push_back({gname, std::move(ne), type, std::move(d)});
  };
  // A tensor stored as the .mlb holds it: F32 vectors {n}, Q8_0 matrices {cols, rows}.
  auto same = [&](const std::string& mlb, const std::string& gname, std::vector<uint64_t> ne) {
    std::vector<uint8_t> d = ne.size() == 1 ? rand_bytes(GGUF_T_F32, 1, ne[0], rng) : q8(ne[1], ne[0]);
    q.want[mlb] = d;
    put(gname, ne, ne.size() == 1 ? GGUF_T_F32 : GGUF_T_Q8_0, d);
  };
  same("tok_embd", "token_embd.weight", {kDim, kVocab});
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    same(b + "attn_norm", b + "attn_norm.weight", {kDim});
    if (l == 0) {
      auto& qkv = q.want[b + "attn_qkv"] = q8(ch, kDim);
      put(b + "attn_qkv.weight", {kDim, ch}, GGUF_T_Q8_0, tile(qkv, 1, row, 2 * nk * kQ35Dv, dv, nk, nv));
      auto& gate = q.want[b + "attn_gate"] = q8(nv * dv, kDim);
      put(b + "attn_gate.weight", {kDim, nv * dv}, GGUF_T_Q8_0, tile(gate, 1, row, 0, dv, nk, nv));
      for (const char* x : {"ssm_beta", "ssm_alpha"}) {
        auto& w = q.want[b + x] = q8(nv, kDim);
        put(b + x + ".weight", {kDim, nv}, GGUF_T_Q8_0, tile(w, 1, row, 0, 1, nk, nv));
      }
      auto& conv = q.want[b + "ssm_conv1d"] = rand_bytes(GGUF_T_F32, ch, kQ35Conv, rng);
      put(b + "ssm_conv1d.weight", {kQ35Conv, ch}, GGUF_T_F32, tile(conv, 1, 4 * kQ35Conv, 2 * nk * kQ35Dv, dv, nk, nv));
      auto& a = q.want[b + "ssm_a"] = rand_bytes(GGUF_T_F32, 1, nv, rng);
      put(b + "ssm_a", {nv}, GGUF_T_F32, tile(a, 1, 4, 0, 1, nk, nv));
      auto& dt = q.want[b + "ssm_dt"] = rand_bytes(GGUF_T_F32, 1, nv, rng);
      put(b + "ssm_dt.bias", {nv}, GGUF_T_F32, tile(dt, 1, 4, 0, 1, nk, nv));
      same(b + "ssm_norm", b + "ssm_norm.weight", {dv});
      // Columns: each of the dim rows holds nv heads of dv / 32 blocks.
      auto& out = q.want[b + "ssm_out"] = q8(kDim, nv * dv);
      put(b + "ssm_out.weight", {nv * dv, kDim}, GGUF_T_Q8_0, tile(out, kDim, 34, 0, dv / 32, nk, nv));
    } else {
      auto& wq = q.want[b + "attn_q"] = q8(qd, kDim);
      auto& wg = q.want[b + "attn_gate"] = q8(qd, kDim);
      std::vector<uint8_t> merged;
      for (uint32_t h = 0; h < kQ35Heads; ++h)
        for (auto* w : {&wq, &wg})
          merged.insert(merged.end(), w->begin() + (long)(h * kQ35Hd * row), w->begin() + (long)((h + 1) * kQ35Hd * row));
      put(b + "attn_q.weight", {kDim, 2 * qd}, GGUF_T_Q8_0, merged);
      same(b + "attn_k", b + "attn_k.weight", {kDim, kQ35Hd});
      same(b + "attn_v", b + "attn_v.weight", {kDim, kQ35Hd});
      same(b + "attn_q_norm", b + "attn_q_norm.weight", {kQ35Hd});
      same(b + "attn_k_norm", b + "attn_k_norm.weight", {kQ35Hd});
      same(b + "attn_output", b + "attn_output.weight", {qd, kDim});
    }
    same(b + "ffn_norm", b + "post_attention_norm.weight", {kDim});
    same(b + "ffn_gate", b + "ffn_gate.weight", {kDim, kHidden});
    same(b + "ffn_up", b + "ffn_up.weight", {kDim, kHidden});
    same(b + "ffn_down", b + "ffn_down.weight", {kHidden, kDim});
  }
  same("output_norm", "output_norm.weight", {kDim});
  return q;
}

// Every .mlb tensor holds the oracle's bytes (Q8 quants and f16 scales split from Q8_0 blocks).
void check_tensors(mlb_file& f, const q35_file& q) {
  CHECK(f.m.n_tensors == q.want.size());
  for (const auto& [name, bytes] : q.want) {
    INFO(name);
    const ml_mlb_tensor t = f.get(name.c_str());
    if (t.type == ML_DT_Q8) {
      std::vector<uint8_t> qs, sc;
      split_blocks(bytes, 34, &qs, &sc);
      CHECK(f.data(t) == qs);
      CHECK(f.scales(t) == sc);
    } else {
      CHECK(t.type == ML_DT_F32);
      CHECK(f.data(t) == bytes);
    }
  }
}

}  // namespace

TEST_CASE("gguf: qwen35 comes back in the .mlb's layout (q/gate split, value heads grouped)", "[gguf]") {
  ml_test_dir d;
  // nv = 3 nk: the tiled and grouped orders differ and are not each other's inverse.
  for (uint32_t nv : {2u, 6u}) {
    INFO("value heads " << nv);
    const q35_file q = qwen35(2, nv);
    const result r = convert(d, q.file.build());
    REQUIRE(r.msg == "");
    REQUIRE(r.s == ML_OK);
    CHECK(r.warn == "");
    mlb_file f(d / "out.mlb");
    const ml_mlb_header& h = f.m.h;
    CHECK(h.arch == (uint32_t)ML_ARCH_QWEN35);
    CHECK(h.rope_type == (uint32_t)ML_ROPE_HALF);
    CHECK(h.flags == (ML_FLAG_QK_NORM | ML_FLAG_ATTN_GATE | ML_FLAG_TIED_CLASSIFIER));
    CHECK(h.n_layers == 2);
    CHECK(h.head_dim == kQ35Hd);
    CHECK(h.n_rot == kQ35Rot);
    CHECK(h.rope_theta == 1e7f);
    CHECK(h.linear_period == 2);
    CHECK(h.linear_k_heads == 2);
    CHECK(h.linear_v_heads == nv);
    CHECK(h.linear_k_dim == kQ35Dv);
    CHECK(h.linear_v_dim == kQ35Dv);
    CHECK(h.linear_conv == kQ35Conv);
    CHECK(h.wtype == (uint32_t)ML_DT_Q8);
    check_tensors(f, q);
    ml_model m;
    ml_error err;
    CHECK(ml_model_load(&m, (d / "out.mlb").c_str(), &err) == ML_OK);
    ml_model_free(&m);
  }
}

TEST_CASE("gguf: qwen35's MTP layers are skipped with a warning, recurrent_layers gives the period", "[gguf]") {
  ml_test_dir d;
  q35_file q = qwen35(2, 2);
  gguf& g = q.file;
  *g.find("qwen35.block_count") = kv_u32("qwen35.block_count", 3);
  g.kvs.push_back(kv_u32("qwen35.nextn_predict_layers", 1));
  g.erase_kv("qwen35.full_attention_interval");
  g.kvs.push_back(kv_raw("qwen35.attention.recurrent_layers", [] {
    bytes b;
    b.u32(9), b.u32(7), b.u64(3);
    b.raw("\1\0\0", 3);
    return b.b;
  }()));
  std::mt19937 rng(3);
  g.ts.push_back({"blk.2.attn_norm.weight", {kDim}, GGUF_T_F32, rand_bytes(GGUF_T_F32, 1, kDim, rng)});
  g.ts.push_back({"blk.2.nextn.eh_proj.weight", {2 * kDim, kDim}, GGUF_T_Q8_0, rand_bytes(GGUF_T_Q8_0, kDim, 2 * kDim, rng)});
  g.ts.push_back({"blk.2.nextn.enorm.weight", {kDim}, GGUF_T_F32, rand_bytes(GGUF_T_F32, 1, kDim, rng)});
  {
    const result r = convert(d, g.build());
    REQUIRE(r.msg == "");
    CHECK(contains(r.warn, "skipped 3 tensors of the multi-token-prediction layer 2..2"));
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.n_layers == 2);
    CHECK(f.m.h.linear_period == 2);
    check_tensors(f, q);
  }
  // A tensor past block_count is still a stray one.
  g.ts.push_back({"blk.3.attn_norm.weight", {kDim}, GGUF_T_F32, rand_bytes(GGUF_T_F32, 1, kDim, rng)});
  const result r = convert(d, g.build());
  CHECK(r.s == ML_E_FORMAT);
  CHECK(contains(r.msg, "tensor blk.3.attn_norm.weight is not part of a qwen35 model with 2 layers"));
}

TEST_CASE("gguf: damaged qwen35 files are refused naming the key or tensor", "[gguf]") {
  struct bad {
    const char* what;
    std::function<void(gguf&)> edit;
    ml_status status;
    const char* needle;
  };
  auto recurrent = [](const char* flags) {
    return kv_raw("qwen35.attention.recurrent_layers", [flags] {
      bytes b;
      b.u32(9), b.u32(7), b.u64(2);
      b.raw(flags, 2);
      return b.b;
    }());
  };
  const std::vector<bad> cases = {
      {"missing ssm key", [](gguf& g) { g.erase_kv("qwen35.ssm.state_size"); }, ML_E_FORMAT,
       "key qwen35.ssm.state_size is missing"},
      {"missing M-RoPE sections", [](gguf& g) { g.erase_kv("qwen35.rope.dimension_sections"); }, ML_E_FORMAT,
       "key qwen35.rope.dimension_sections is missing"},
      {"value heads narrower than key heads",
       [](gguf& g) { *g.find("qwen35.ssm.inner_size") = kv_u32("qwen35.ssm.inner_size", 32); }, ML_E_SHAPE,
       "qwen35.ssm.inner_size 32 is not .ssm.time_step_rank x .ssm.state_size = 64"},
      {"value heads not a multiple of key heads",
       [](gguf& g) { *g.find("qwen35.ssm.time_step_rank") = kv_u32("qwen35.ssm.time_step_rank", 3); }, ML_E_SHAPE,
       "time_step_rank 3 (value heads) is not a multiple of .ssm.group_count 2"},
      {"every block MTP", [](gguf& g) { g.kvs.push_back(kv_u32("qwen35.nextn_predict_layers", 2)); }, ML_E_FORMAT,
       "nextn_predict_layers 2 leaves none of block_count 2"},
      {"layer pattern without a period",
       [&](gguf& g) { g.erase_kv("qwen35.full_attention_interval"), g.kvs.push_back(recurrent("\0\1")); }, ML_E_FORMAT,
       "layer 1 is recurrent, so the layers do not repeat with period 1"},
      {"wrong ssm_conv1d shape",
       [](gguf& g) {
         tensor* t = g.tensor_named("blk.0.ssm_conv1d.weight");
         t->ne[0] = 3, t->data.resize(t->data.size() / 4 * 3);
       },
       ML_E_SHAPE, "tensor blk.0.ssm_conv1d.weight: shape [3, 192, 1, 1] does not match the header's [4, 192]"},
      {"attn_q without its gate rows",
       [](gguf& g) {
         tensor* t = g.tensor_named("blk.1.attn_q.weight");
         t->ne[1] /= 2, t->data.resize(t->data.size() / 2);
       },
       ML_E_SHAPE, "blk.1.attn_q.weight: shape [32, 32, 1, 1] is not [32, 64]: qwen35's attn_q holds the query and the output gate"},
      {"a missing ssm tensor", [](gguf& g) { g.erase_tensor("blk.0.ssm_dt.bias"); }, ML_E_FORMAT,
       "tensor blk.0.ssm_dt.bias is missing"},
  };
  ml_test_dir d;
  for (const bad& c : cases) {
    INFO(c.what);
    q35_file q = qwen35(2, 2);
    c.edit(q.file);
    const result r = convert(d, q.file.build());
    CHECK(r.s == c.status);
    CHECK(contains(r.msg, c.needle));
    if (!contains(r.msg, c.needle)) WARN(r.msg);
  }
  // Sections leaving a rotated pair to the fourth (position 0 for text) convert with a warning.
  q35_file q = qwen35(2, 2);
  *q.file.find("qwen35.rope.dimension_sections") = kv_i32s("qwen35.rope.dimension_sections", {4, 0, 0, 0});
  const result r = convert(d, q.file.build());
  CHECK(r.s == ML_OK);
  CHECK(contains(r.warn, "leaves 2 of the 4 rotated pairs (the first: pair 1) unrotated"));
}

TEST_CASE("gguf: the qwen35 pre-tokenizer keeps combining marks in a letter run, qwen2's splits them", "[gguf]") {
  // "कि": क (E0 A4 95) and the vowel sign ि (E0 A4 BF, category Mc), as GPT-2 byte-level pieces
  // (bytes_to_unicode: E0 -> à, A4 -> ¤, 95 -> ķ, BF -> ¿), with merges up to the whole syllable.
  const std::string a = "\xC3\xA0", c = "\xC2\xA4", k = "\xC4\xB7", i = "\xC2\xBF";
  const std::vector<std::string> toks = {a, c, k, i, a + c, a + c + k, a + c + i, a + c + k + a + c + i};
  for (const char* pre : {"qwen35", "qwen2"}) {
    INFO(pre);
    ml_test_dir d;
    gguf g = base();
    g.kvs.push_back(kv_str("tokenizer.ggml.model", "gpt2"));
    g.kvs.push_back(kv_str("tokenizer.ggml.pre", pre));
    g.kvs.push_back(kv_strs("tokenizer.ggml.tokens", toks));
    g.kvs.push_back(kv_strs("tokenizer.ggml.merges", {a + " " + c, a + c + " " + k, a + c + " " + i,
                                                      a + c + k + " " + a + c + i}));
    const result r = convert(d, g.build());
    REQUIRE(r.msg == "");
    ml_model m;
    load_converted(d, &m);
    ml_error err;
    int32_t ids[8];
    size_t n = 0;
    REQUIRE(ml_tokenizer_encode(m.tok, "\xE0\xA4\x95\xE0\xA4\xBF", 6, false, ids, 8, &n, &err) == ML_OK);
    // qwen35: one pre-token, merged whole; qwen2: the sign is a pre-token of its own.
    const std::vector<int32_t> want = std::string(pre) == "qwen35" ? std::vector<int32_t>{7} : std::vector<int32_t>{5, 6};
    CHECK(std::vector<int32_t>(ids, ids + n) == want);
    ml_model_free(&m);
  }
}
