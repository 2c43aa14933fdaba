// .mlb reader for ref_forward, from docs/format.md (see mlb_reader.h for the contract).
#include "mlb_reader.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace ref {

static_assert(std::endian::native == std::endian::little, "ref_forward reads little-endian files natively");

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw RefError(1, path + ": cannot open file");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw RefError(1, path + ": read error");
  return bytes;
}

bool is_mlb(const std::vector<uint8_t>& bytes) {
  return bytes.size() >= 8 && std::memcmp(bytes.data(), kMlbMagic, 8) == 0;
}

double half_bits_to_double(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exp = (h >> 10) & 0x1F;
  const int mant = h & 0x3FF;
  if (exp == 0x1F) return mant ? std::nan("") : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(double(mant), -24);
  return sign * std::ldexp(double(mant + 1024), exp - 25);
}

namespace {

enum : uint32_t { T_F32 = 0, T_F16 = 1, T_Q8 = 2, T_Q4 = 3 };
const char* type_name(uint32_t t) {
  switch (t) {
    case T_F32: return "F32";
    case T_F16: return "F16";
    case T_Q8: return "Q8";
    case T_Q4: return "Q4";
    default: return "?";
  }
}

struct Entry {
  std::string name;
  uint32_t type, scale_type, rows, cols;
  uint64_t data_offset, data_size, scale_offset, scale_size;
};

// Little-endian field access with bounds checks, errors prefixed with the file name.
struct Bytes {
  const std::string& path;
  const std::vector<uint8_t>& b;

  [[noreturn]] void fail(const std::string& msg) const { throw RefError(2, path + ": " + msg); }
  void need(uint64_t off, uint64_t n, const char* what) const {
    if (off > b.size() || n > b.size() - off) {
      std::ostringstream s;
      s << "truncated: " << what << " at offset " << off << " needs " << n << " bytes, file has " << b.size();
      fail(s.str());
    }
  }
  template <class T> T get(uint64_t off, const char* what) const {
    need(off, sizeof(T), what);
    T v;
    std::memcpy(&v, b.data() + off, sizeof(T));
    return v;
  }
};

uint64_t mul_checked(uint64_t a, uint64_t b, const Bytes& f, const std::string& what) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) f.fail(what + ": size overflows 64 bits");
  return r;
}

// Dequantizes one directory entry into a RefMatrix (any of the four types).
RefMatrix dequant(const Bytes& f, const Entry& e) {
  RefMatrix m;
  m.rows = e.rows;
  m.cols = e.cols;
  const uint64_t n = uint64_t(e.rows) * e.cols;
  m.data.resize(n);
  const uint8_t* data = f.b.data() + e.data_offset;
  if (e.type == T_F32) {
    for (uint64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, data + 4 * i, 4);
      if (!std::isfinite(v)) f.fail("tensor " + e.name + ": non-finite value at element " + std::to_string(i));
      m.data[i] = v;
    }
    return m;
  }
  if (e.type == T_F16) {
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      m.data[i] = half_bits_to_double(h);
      if (!std::isfinite(m.data[i])) f.fail("tensor " + e.name + ": non-finite value at element " + std::to_string(i));
    }
    return m;
  }
  // Q8 / Q4: scales[rows][cols/32], f32 or f16.
  const uint64_t n_blocks = n / 32;
  std::vector<double> scale(n_blocks);
  const uint8_t* sp = f.b.data() + e.scale_offset;
  for (uint64_t k = 0; k < n_blocks; ++k) {
    if (e.scale_type == 0) {
      float v;
      std::memcpy(&v, sp + 4 * k, 4);
      scale[k] = v;
    } else {
      uint16_t h;
      std::memcpy(&h, sp + 2 * k, 2);
      scale[k] = half_bits_to_double(h);
    }
    if (!std::isfinite(scale[k])) f.fail("tensor " + e.name + ": non-finite scale in block " + std::to_string(k));
  }
  if (e.type == T_Q8) {
    for (uint64_t i = 0; i < n; ++i) {
      const int8_t q = int8_t(data[i]);
      if (q == -128) f.fail("tensor " + e.name + ": Q8 quant -128 at element " + std::to_string(i));
      m.data[i] = double(q) * scale[i / 32];
    }
  } else {  // Q4: per block 16 bytes; byte j = element j (low nibble) and element j+16 (high nibble)
    for (uint64_t blk = 0; blk < n_blocks; ++blk) {
      const uint8_t* qb = data + 16 * blk;
      for (int j = 0; j < 16; ++j) {
        m.data[32 * blk + j] = double((qb[j] & 0x0F) - 8) * scale[blk];
        m.data[32 * blk + j + 16] = double((qb[j] >> 4) - 8) * scale[blk];
      }
    }
  }
  return m;
}

}  // namespace

RefModel load_mlb(const std::string& path, const std::vector<uint8_t>& bytes) {
  const Bytes f{path, bytes};
  if (!is_mlb(bytes)) f.fail("bad magic (expected KRAFLMLB)");
  f.need(0, 256, "header");
  auto u32 = [&](uint64_t off, const char* what) { return f.get<uint32_t>(off, what); };
  auto u64 = [&](uint64_t off, const char* what) { return f.get<uint64_t>(off, what); };
  auto f32 = [&](uint64_t off, const char* what) { return f.get<float>(off, what); };
  auto bad = [&](const char* field, double v, const char* why) {
    std::ostringstream s;
    s << "header field " << field << " = " << v << ": " << why;
    f.fail(s.str());
  };

  const uint32_t version = u32(8, "version");
  if (version != 1 && version != 2) bad("version", version, "only versions 1 and 2 are known");
  if (u32(12, "header_size") != 256) bad("header_size", u32(12, "header_size"), "must be 256");
  // Reserved bytes: version 1 ends its fields at 184, version 2 at 200.
  for (uint64_t off = version == 1 ? 184 : 200; off < 256; ++off)
    if (bytes[off] != 0) {
      std::ostringstream s;
      s << "header: reserved byte at offset " << off << " is " << int(bytes[off]) << ", must be 0 (version "
        << version << ")";
      f.fail(s.str());
    }

  RefModel m;
  m.kind = "mlb";
  m.quantized = true;
  m.arch = u32(16, "arch");
  if (m.arch > 4) bad("arch", m.arch, "must be 0 llama, 1 qwen2, 2 qwen3, 3 gemma3 or 4 qwen3.5");
  m.dim = u32(20, "dim");
  m.hidden_dim = u32(24, "hidden_dim");
  m.n_layers = u32(28, "n_layers");
  m.n_heads = u32(32, "n_heads");
  m.n_kv_heads = u32(36, "n_kv_heads");
  m.head_dim = u32(40, "head_dim");
  m.vocab = u32(44, "vocab_size");
  m.max_seq = u32(48, "max_seq");
  const uint32_t wtype = u32(52, "wtype"), scale_type = u32(56, "scale_type");
  const float eps = f32(60, "norm_eps"), theta = f32(64, "rope_theta");
  m.rope_type = u32(68, "rope_type");
  m.rope_scaling = u32(72, "rope_scaling");
  const float rope_factor = f32(76, "rope_factor"), low_ff = f32(80, "rope_low_freq_factor");
  const float high_ff = f32(84, "rope_high_freq_factor");
  m.rope_orig_max_seq = u32(88, "rope_orig_max_seq");
  const uint32_t flags = u32(92, "flags");
  m.activation = u32(96, "activation");
  const float embed_scale = f32(100, "embed_scale");
  m.sliding_window = u32(104, "sliding_window");
  m.sliding_pattern = u32(108, "sliding_pattern");
  m.linear_period = u32(112, "linear_period");
  m.linear_k_heads = u32(116, "linear_k_heads");
  m.linear_v_heads = u32(120, "linear_v_heads");
  m.linear_k_dim = u32(124, "linear_k_dim");
  m.linear_v_dim = u32(128, "linear_v_dim");
  m.linear_conv = u32(132, "linear_conv");
  const uint32_t n_tensors = u32(148, "n_tensors");
  const uint64_t dir_offset = u64(152, "dir_offset"), tok_offset = u64(160, "tokenizer_offset");
  const uint64_t tok_size = u64(168, "tokenizer_size"), file_size = u64(176, "file_size");
  // Version 2 fields (zero, i.e. their defaults, in a version 1 file: checked above).
  const float local_theta = f32(184, "rope_local_theta");
  const uint32_t n_rot = u32(188, "n_rot");
  const float attn_scale = f32(192, "attn_scale"), softcap = f32(196, "logit_softcap");

  if (m.dim == 0 || m.dim % 32) bad("dim", m.dim, "must be a positive multiple of 32");
  if (m.hidden_dim == 0 || m.hidden_dim % 32) bad("hidden_dim", m.hidden_dim, "must be a positive multiple of 32");
  if (m.n_layers == 0) bad("n_layers", 0, "must be >= 1");
  if (m.n_heads == 0) bad("n_heads", 0, "must be >= 1");
  if (m.n_kv_heads == 0 || m.n_heads % m.n_kv_heads) bad("n_kv_heads", m.n_kv_heads, "must divide n_heads");
  if (m.head_dim == 0 || m.head_dim % 2) bad("head_dim", m.head_dim, "must be even and positive");
  if ((uint64_t(m.n_heads) * m.head_dim) % 32) bad("head_dim", m.head_dim, "n_heads*head_dim must be a multiple of 32");
  if (m.vocab < 3) bad("vocab_size", m.vocab, "must be >= 3");
  if (m.max_seq == 0) bad("max_seq", 0, "must be >= 1");
  if (wtype != T_Q8 && wtype != T_Q4) bad("wtype", wtype, "must be 2 (Q8) or 3 (Q4)");
  if (scale_type > 1) bad("scale_type", scale_type, "must be 0 (f32) or 1 (f16)");
  if (!(eps > 0) || !std::isfinite(eps)) bad("norm_eps", eps, "must be finite and > 0");
  if (!(theta > 0) || !std::isfinite(theta)) bad("rope_theta", theta, "must be finite and > 0");
  if (m.rope_type > 1) bad("rope_type", m.rope_type, "must be 0 or 1");
  if (m.rope_scaling > 2) bad("rope_scaling", m.rope_scaling, "must be 0 none, 1 llama3 or 2 linear");
  if (m.rope_scaling != 0 && !(rope_factor > 0 && std::isfinite(rope_factor)))
    bad("rope_factor", rope_factor, "must be finite and > 0 with rope_scaling");
  if (m.rope_scaling == 1) {
    if (!(low_ff > 0 && std::isfinite(low_ff))) bad("rope_low_freq_factor", low_ff, "must be finite and > 0 (llama3)");
    if (!(high_ff > low_ff && std::isfinite(high_ff)))
      bad("rope_high_freq_factor", high_ff, "must be finite and > rope_low_freq_factor (llama3)");
    if (m.rope_orig_max_seq == 0) bad("rope_orig_max_seq", 0, "must be >= 1 (llama3)");
  }
  if (flags & ~0x1Fu) bad("flags", flags, "only bits 0..4 are defined");
  if (m.activation > 1) bad("activation", m.activation, "must be 0 (SiLU) or 1 (GELU tanh)");
  if (!std::isfinite(embed_scale)) bad("embed_scale", embed_scale, "must be finite");
  if (m.sliding_window == 0 && m.sliding_pattern != 0)
    bad("sliding_pattern", m.sliding_pattern, "must be 0 when sliding_window is 0");
  if (!(local_theta >= 0) || !std::isfinite(local_theta))
    bad("rope_local_theta", local_theta, "must be finite and >= 0");
  if (n_rot % 2 || n_rot > m.head_dim) bad("n_rot", n_rot, "must be even and <= head_dim (0 = head_dim)");
  if (!(attn_scale >= 0) || !std::isfinite(attn_scale)) bad("attn_scale", attn_scale, "must be finite and >= 0");
  if (!(softcap >= 0) || !std::isfinite(softcap)) bad("logit_softcap", softcap, "must be finite and >= 0");
  if (m.linear_period > 0) {
    const std::pair<const char*, uint32_t> lin[] = {{"linear_k_heads", m.linear_k_heads},
                                                    {"linear_v_heads", m.linear_v_heads},
                                                    {"linear_k_dim", m.linear_k_dim},
                                                    {"linear_v_dim", m.linear_v_dim},
                                                    {"linear_conv", m.linear_conv}};
    for (const auto& [name, v] : lin)
      if (v == 0 || v > 65536) bad(name, v, "must be in 1..65536 when linear_period > 0");
    if (m.linear_v_heads % m.linear_k_heads)
      bad("linear_v_heads", m.linear_v_heads, "must be a multiple of linear_k_heads");
    if ((uint64_t(m.linear_v_heads) * m.linear_v_dim) % 32)
      bad("linear_v_dim", m.linear_v_dim, "linear_v_heads*linear_v_dim must be a multiple of 32");
    if (uint64_t(m.linear_v_heads) * m.linear_k_dim * m.linear_v_dim > (uint64_t(1) << 28))
      bad("linear_v_heads", m.linear_v_heads, "the delta state (v_heads*k_dim*v_dim) exceeds 2^28 values");
  }
  if (file_size != bytes.size()) {
    std::ostringstream s;
    s << "header field file_size = " << file_size << " but the file has " << bytes.size() << " bytes";
    f.fail(s.str());
  }
  m.norm_eps = eps;
  m.rope_theta = theta;
  m.rope_factor = m.rope_scaling ? rope_factor : 1.0;
  m.rope_low_freq_factor = low_ff;
  m.rope_high_freq_factor = high_ff;
  m.embed_scale = embed_scale;
  m.rope_local_theta = local_theta;
  m.n_rot = n_rot ? n_rot : m.head_dim;
  m.attn_scale = attn_scale;
  m.logit_softcap = softcap;
  m.qkv_bias = (flags & 1u) != 0;
  m.qk_norm = (flags & 2u) != 0;
  m.post_norms = (flags & 4u) != 0;
  m.tied = (flags & 8u) != 0;
  m.attn_gate = (flags & 16u) != 0;

  // Byte ranges that must not overlap: header, directory, tokenizer, every data and scale array.
  struct Range { uint64_t begin, end; std::string what; };
  std::vector<Range> ranges;
  auto add_range = [&](uint64_t off, uint64_t size, const std::string& what) {
    f.need(off, size, what.c_str());
    if (size) ranges.push_back({off, off + size, what});
  };
  add_range(0, 256, "header");
  if (dir_offset < 256) bad("dir_offset", double(dir_offset), "must be >= 256");
  add_range(dir_offset, mul_checked(n_tensors, 96, f, "directory"), "directory");
  if (tok_offset != 0) {
    if (tok_size < 8) bad("tokenizer_size", double(tok_size), "must be >= 8 when tokenizer_offset is set");
    add_range(tok_offset, tok_size, "tokenizer section");
  }

  std::map<std::string, Entry> entries;
  for (uint32_t i = 0; i < n_tensors; ++i) {
    const uint64_t at = dir_offset + 96ull * i;
    const char* raw = reinterpret_cast<const char*>(bytes.data() + at);
    if (std::memchr(raw, 0, 48) == nullptr) f.fail("directory entry " + std::to_string(i) + ": name has no NUL");
    Entry e;
    e.name = std::string(raw, strnlen(raw, 48));
    e.type = u32(at + 48, "type");
    e.scale_type = u32(at + 52, "scale_type");
    e.rows = u32(at + 56, "rows");
    e.cols = u32(at + 60, "cols");
    e.data_offset = u64(at + 64, "data_offset");
    e.data_size = u64(at + 72, "data_size");
    e.scale_offset = u64(at + 80, "scale_offset");
    e.scale_size = u64(at + 88, "scale_size");
    const std::string t = "tensor " + e.name + ": ";
    if (e.type > T_Q4) f.fail(t + "type " + std::to_string(e.type) + " unknown");
    const bool quant = e.type == T_Q8 || e.type == T_Q4;
    const uint64_t n = uint64_t(e.rows) * e.cols;  // u32*u32 fits in u64
    uint64_t want_data = 0;
    switch (e.type) {
      case T_F32: want_data = mul_checked(n, 4, f, t); break;
      case T_F16: want_data = mul_checked(n, 2, f, t); break;
      case T_Q8: want_data = n; break;
      case T_Q4: want_data = n / 2; break;
    }
    if (quant && e.cols % 32) f.fail(t + "cols " + std::to_string(e.cols) + " not a multiple of 32");
    if (quant && e.scale_type != scale_type)
      f.fail(t + "scale_type " + std::to_string(e.scale_type) + " differs from the header's");
    if (!quant && (e.scale_type != 0 || e.scale_offset != 0 || e.scale_size != 0))
      f.fail(t + "F32/F16 tensors must have scale_type, scale_offset and scale_size 0");
    if (e.data_size != want_data)
      f.fail(t + "data_size " + std::to_string(e.data_size) + ", expected " + std::to_string(want_data));
    if (e.data_offset % 64) f.fail(t + "data_offset " + std::to_string(e.data_offset) + " not a multiple of 64");
    add_range(e.data_offset, e.data_size, e.name + " data");
    if (quant) {
      const uint64_t want_scales = (n / 32) * (scale_type ? 2 : 4);
      if (e.scale_size != want_scales)
        f.fail(t + "scale_size " + std::to_string(e.scale_size) + ", expected " + std::to_string(want_scales));
      if (e.scale_offset % 64) f.fail(t + "scale_offset " + std::to_string(e.scale_offset) + " not a multiple of 64");
      add_range(e.scale_offset, e.scale_size, e.name + " scales");
    }
    if (!entries.emplace(e.name, e).second) f.fail(t + "appears twice in the directory");
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].begin < ranges[i - 1].end) f.fail(ranges[i - 1].what + " overlaps " + ranges[i].what);

  // The Llama tensor table.
  size_t used = 0;
  std::set<std::string> taken;
  auto take = [&](const std::string& name, uint32_t type, uint32_t rows, uint32_t cols) {
    auto it = entries.find(name);
    if (it == entries.end()) f.fail("tensor " + name + " missing");
    const Entry& e = it->second;
    if (e.type != type)
      f.fail("tensor " + name + ": type " + type_name(e.type) + ", expected " + type_name(type));
    if (e.rows != rows || e.cols != cols) {
      std::ostringstream s;
      s << "tensor " << name << ": shape " << e.rows << "x" << e.cols << ", expected " << rows << "x" << cols;
      f.fail(s.str());
    }
    ++used;
    taken.insert(name);
    return dequant(f, e);
  };
  const uint32_t qdim = m.n_heads * m.head_dim, kvdim = m.n_kv_heads * m.head_dim;
  const uint32_t nk = m.linear_k_heads, nv = m.linear_v_heads, dk = m.linear_k_dim, dv = m.linear_v_dim;
  m.tok_embd = take("tok_embd", wtype, m.vocab, m.dim);
  for (uint32_t l = 0; l < m.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    auto vec = [&](const std::string& name, uint32_t n) { return take(p + name, T_F32, 1, n).data; };
    RefLayer L;
    L.linear = m.is_linear(l);
    L.attn_norm = vec("attn_norm", m.dim);
    if (L.linear) {
      const uint64_t ch = 2ull * nk * dk + uint64_t(nv) * dv;
      if (ch > 0xFFFFFFFFull) bad("linear_k_dim", dk, "2*k_heads*k_dim + v_heads*v_dim exceeds 32 bits");
      L.wqkv = take(p + "attn_qkv", wtype, uint32_t(ch), m.dim);
      L.wz = take(p + "attn_gate", wtype, nv * dv, m.dim);
      L.wbeta = take(p + "ssm_beta", wtype, nv, m.dim);
      L.walpha = take(p + "ssm_alpha", wtype, nv, m.dim);
      L.conv = take(p + "ssm_conv1d", T_F32, uint32_t(ch), m.linear_conv);
      L.ssm_a = vec("ssm_a", nv);
      L.ssm_dt = vec("ssm_dt", nv);
      L.ssm_norm = vec("ssm_norm", dv);
      L.ssm_out = take(p + "ssm_out", wtype, m.dim, nv * dv);
    } else {
      L.wq = take(p + "attn_q", wtype, qdim, m.dim);
      L.wk = take(p + "attn_k", wtype, kvdim, m.dim);
      L.wv = take(p + "attn_v", wtype, kvdim, m.dim);
      if (m.qkv_bias) {
        L.bq = vec("attn_q.bias", qdim);
        L.bk = vec("attn_k.bias", kvdim);
        L.bv = vec("attn_v.bias", kvdim);
      }
      if (m.qk_norm) {
        L.q_norm = vec("attn_q_norm", m.head_dim);
        L.k_norm = vec("attn_k_norm", m.head_dim);
      }
      if (m.attn_gate) L.wgate = take(p + "attn_gate", wtype, qdim, m.dim);
      L.wo = take(p + "attn_output", wtype, m.dim, qdim);
    }
    if (m.post_norms) {
      L.post_attn_norm = vec("post_attention_norm", m.dim);
      L.post_ffn_norm = vec("post_ffw_norm", m.dim);
    }
    L.ffn_norm = vec("ffn_norm", m.dim);
    L.w1 = take(p + "ffn_gate", wtype, m.hidden_dim, m.dim);
    L.w3 = take(p + "ffn_up", wtype, m.hidden_dim, m.dim);
    L.w2 = take(p + "ffn_down", wtype, m.dim, m.hidden_dim);
    m.layers.push_back(std::move(L));
  }
  m.output_norm = take("output_norm", T_F32, 1, m.dim).data;
  if (!m.tied) m.output = take("output", wtype, m.vocab, m.dim);
  if (used != entries.size()) {
    // Name the first entry the header's model does not have (directory order is free; take the
    // alphabetically first, so the message is stable).
    for (const auto& [name, e] : entries) {
      (void)e;
      if (!taken.count(name))
        f.fail("unexpected tensor " + name + ": not a tensor of the model the header describes (n_layers " +
               std::to_string(m.n_layers) + ", flags " + std::to_string(flags) + ", linear_period " +
               std::to_string(m.linear_period) + ")");
    }
  }
  return m;
}

}  // namespace ref
