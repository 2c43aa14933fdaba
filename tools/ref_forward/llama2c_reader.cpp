// llama2.c checkpoint reader for ref_forward (see llama2c_reader.h for the layouts).
#include "llama2c_reader.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace ref {

namespace {

constexpr uint32_t kAk42Magic = 0x616b3432;

// Sequential float32 reader over the checkpoint bytes.
struct Cursor {
  const std::string& path;
  const std::vector<uint8_t>& b;
  uint64_t pos;

  [[noreturn]] void fail(const std::string& msg) const { throw RefError(2, path + ": " + msg); }
  void need(uint64_t n, const std::string& what) const {
    if (n > (b.size() - pos) / 4) {
      std::ostringstream s;
      s << "truncated: " << what << " at offset " << pos << " needs " << 4 * n << " bytes, file has " << b.size();
      fail(s.str());
    }
  }
  void skip(uint64_t n, const std::string& what) {
    need(n, what);
    pos += 4 * n;
  }
  std::vector<double> floats(uint64_t n, const std::string& what) {
    need(n, what);
    std::vector<double> v(n);
    for (uint64_t i = 0; i < n; ++i) {
      float x;
      std::memcpy(&x, b.data() + pos + 4 * i, 4);
      if (!std::isfinite(x)) fail(what + ": non-finite value at element " + std::to_string(i));
      v[i] = x;
    }
    pos += 4 * n;
    return v;
  }
  RefMatrix matrix(uint32_t rows, uint32_t cols, const std::string& what) {
    RefMatrix m;
    m.rows = rows;
    m.cols = cols;
    m.data = floats(uint64_t(rows) * cols, what);
    return m;
  }
};

}  // namespace

RefModel load_llama2c(const std::string& path, const std::vector<uint8_t>& bytes) {
  Cursor c{path, bytes, 0};
  int32_t p[7];
  bool shared = false;
  bool v1 = false;
  uint32_t magic = 0;
  if (bytes.size() >= 4) std::memcpy(&magic, bytes.data(), 4);
  if (magic == kAk42Magic) {
    if (bytes.size() < 256) c.fail("truncated: version-1 header needs 256 bytes");
    int32_t version;
    std::memcpy(&version, bytes.data() + 4, 4);
    if (version != 1)
      c.fail("llama2.c checkpoint version " + std::to_string(version) + " not supported (only 0 and 1, float32)");
    std::memcpy(p, bytes.data() + 8, sizeof p);
    shared = bytes[36] != 0;
    if (p[5] <= 0) c.fail("header field vocab_size = " + std::to_string(p[5]) + ": must be > 0 in version 1");
    c.pos = 256;
    v1 = true;
  } else {
    if (bytes.size() < 28) c.fail("truncated: llama2.c header needs 28 bytes (not a .mlb or llama2.c checkpoint?)");
    std::memcpy(p, bytes.data(), sizeof p);
    shared = p[5] > 0;
    if (p[5] < 0) p[5] = -p[5];
    c.pos = 28;
  }
  static const char* names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i)
    if (p[i] <= 0 || p[i] > (1 << 24))
      c.fail(std::string("header field ") + names[i] + " = " + std::to_string(p[i]) +
             ": out of range (not a llama2.c checkpoint?)");

  RefModel m;
  m.kind = "llama2c";
  m.quantized = false;
  m.dim = uint32_t(p[0]);
  m.hidden_dim = uint32_t(p[1]);
  m.n_layers = uint32_t(p[2]);
  m.n_heads = uint32_t(p[3]);
  m.n_kv_heads = uint32_t(p[4]);
  m.vocab = uint32_t(p[5]);
  m.max_seq = uint32_t(p[6]);
  if (m.dim % m.n_heads) c.fail("header: dim " + std::to_string(m.dim) + " not divisible by n_heads");
  if (m.n_heads % m.n_kv_heads) c.fail("header: n_kv_heads " + std::to_string(m.n_kv_heads) + " does not divide n_heads");
  m.head_dim = m.dim / m.n_heads;
  m.n_rot = m.head_dim;
  if (m.head_dim % 2) c.fail("header: head_dim " + std::to_string(m.head_dim) + " is odd");
  m.norm_eps = 1e-5;
  m.rope_theta = 10000.0;
  m.rope_type = 0;
  m.embed_scale = 1.0;
  m.tied = shared;

  const uint32_t L = m.n_layers, dim = m.dim, kvdim = m.n_kv_heads * m.head_dim, hid = m.hidden_dim;
  m.layers.resize(L);
  auto per_layer = [&](const char* what, auto&& read_one) {
    for (uint32_t l = 0; l < L; ++l) read_one(m.layers[l], std::string(what) + "[" + std::to_string(l) + "]");
  };
  auto attn_norms = [&] { per_layer("rms_att", [&](RefLayer& y, const std::string& w) { y.attn_norm = c.floats(dim, w); }); };
  auto ffn_norms = [&] { per_layer("rms_ffn", [&](RefLayer& y, const std::string& w) { y.ffn_norm = c.floats(dim, w); }); };
  auto embedding = [&] { m.tok_embd = c.matrix(m.vocab, dim, "token_embedding"); };
  auto attn = [&] {
    per_layer("wq", [&](RefLayer& y, const std::string& w) { y.wq = c.matrix(dim, dim, w); });
    per_layer("wk", [&](RefLayer& y, const std::string& w) { y.wk = c.matrix(kvdim, dim, w); });
    per_layer("wv", [&](RefLayer& y, const std::string& w) { y.wv = c.matrix(kvdim, dim, w); });
    per_layer("wo", [&](RefLayer& y, const std::string& w) { y.wo = c.matrix(dim, dim, w); });
  };
  auto ffn = [&] {
    per_layer("w1", [&](RefLayer& y, const std::string& w) { y.w1 = c.matrix(hid, dim, w); });
    per_layer("w2", [&](RefLayer& y, const std::string& w) { y.w2 = c.matrix(dim, hid, w); });
    per_layer("w3", [&](RefLayer& y, const std::string& w) { y.w3 = c.matrix(hid, dim, w); });
  };

  if (v1) {
    attn_norms();
    ffn_norms();
    m.output_norm = c.floats(dim, "rms_final");
    embedding();
    attn();
    ffn();
  } else {
    embedding();
    attn_norms();
    attn();
    ffn_norms();
    ffn();
    m.output_norm = c.floats(dim, "rms_final");
    c.skip(uint64_t(m.max_seq) * (m.head_dim / 2), "freq_cis_real");
    c.skip(uint64_t(m.max_seq) * (m.head_dim / 2), "freq_cis_imag");
  }
  if (!m.tied) m.output = c.matrix(m.vocab, dim, "wcls");
  if (c.pos != bytes.size()) {
    std::ostringstream s;
    s << "file has " << bytes.size() << " bytes but the header's shapes account for " << c.pos
      << (v1 ? "" : " (legacy layout; vocab_size sign selects the separate classifier)");
    c.fail(s.str());
  }
  return m;
}

}  // namespace ref
