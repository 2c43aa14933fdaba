// The Hugging Face importer (convert/hf_import.cpp), called directly: tiny models written here as
// safetensors folders (hf_fixture.h) convert to .mlb files that are read back with the engine's
// parser and dequantized, and every tensor is compared with the values the test wrote, transformed
// as the Hugging Face layout defines (1 + w norms, Qwen3.5's interleaved query/gate rows,
// -exp(A_log), the FFN padding) -- the test computes each from the source values itself.
// config.json is test_hf_config.cpp's, damaged folders test_hf_import_bad.cpp's; the end-to-end
// run of a real model (tinystories-656k-hf) is e2e/cli/test_hf_import.py.
#include "hf_fixture.h"  // Catch2, the converter, the .mlb reader, test_util.h
#include "core/aligned.h"

using namespace hf_test;

// --- conversions read back -----------------------------------------------------------------------

TEST_CASE("hf import: a tiny Llama (F32, untied) converts tensor for tensor", "[hf_import]") {
  ml_test_dir d;
  model_dir m = tiny_llama();
  m.write(d);
  const convert_result r = convert(d.p.string(), d / "out.mlb");
  INFO(r.msg);
  REQUIRE(r.s == ML_OK);
  mlb_file f(d / "out.mlb");
  CHECK(f.m.h.arch == ML_ARCH_LLAMA);
  CHECK(f.m.h.rope_type == ML_ROPE_HALF);
  CHECK(f.m.h.hidden_dim == 96);
  CHECK(f.m.h.hidden_dim_orig == 72);
  CHECK(f.m.h.flags == 0);
  CHECK(f.m.n_tensors == 1 + 2 * 9 + 1 + 1);
  CHECK(f.m.tokenizer_kind == 2);
  expect_tensor(f, "tok_embd", VOCAB, DIM, m.find("model.embed_tokens.weight")->v, VOCAB, DIM);
  expect_tensor(f, "output", VOCAB, DIM, m.find("lm_head.weight")->v, VOCAB, DIM);
  expect_tensor(f, "output_norm", 1, DIM, m.find("model.norm.weight")->v, 1, DIM);
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", b = "blk." + std::to_string(l) + ".";
    expect_tensor(f, b + "attn_norm", 1, DIM, m.find(p + "input_layernorm.weight")->v, 1, DIM);
    expect_tensor(f, b + "attn_q", 64, DIM, m.find(p + "self_attn.q_proj.weight")->v, 64, DIM);  // not permuted
    expect_tensor(f, b + "attn_k", 32, DIM, m.find(p + "self_attn.k_proj.weight")->v, 32, DIM);
    expect_tensor(f, b + "attn_v", 32, DIM, m.find(p + "self_attn.v_proj.weight")->v, 32, DIM);
    expect_tensor(f, b + "attn_output", DIM, 64, m.find(p + "self_attn.o_proj.weight")->v, DIM, 64);
    expect_tensor(f, b + "ffn_norm", 1, DIM, m.find(p + "post_attention_layernorm.weight")->v, 1, DIM);
    expect_tensor(f, b + "ffn_gate", 96, DIM, m.find(p + "mlp.gate_proj.weight")->v, 72, DIM);  // zero rows 72..95
    expect_tensor(f, b + "ffn_up", 96, DIM, m.find(p + "mlp.up_proj.weight")->v, 72, DIM);
    expect_tensor(f, b + "ffn_down", DIM, 96, m.find(p + "mlp.down_proj.weight")->v, DIM, 72);  // zero columns
  }
}

TEST_CASE("hf import: BF16 and F16 weights are widened exactly, a tied matrix stored as lm_head only", "[hf_import]") {
  for (const char* dtype : {"BF16", "F16"}) {
    INFO(dtype);
    ml_test_dir d;
    model_dir m = tiny_llama(dtype, true);
    // As tinystories-656k-hf: the tied matrix saved once, under lm_head's name.
    m.find("model.embed_tokens.weight")->name = "lm_head.weight";
    m.meta = "{\"format\":\"pt\",\"model.embed_tokens.weight\":\"lm_head.weight\"}";
    m.write(d);
    const convert_result r = convert(d.p.string(), d / "out.mlb");
    INFO(r.msg);
    REQUIRE(r.s == ML_OK);
    mlb_file f(d / "out.mlb");
    CHECK(f.m.h.flags == ML_FLAG_TIED_CLASSIFIER);
    CHECK_FALSE(f.has("output"));
    expect_tensor(f, "tok_embd", VOCAB, DIM, m.find("lm_head.weight")->v, VOCAB, DIM);
    // F32 norms hold the widened values exactly.
    const std::vector<float> n = f.values("blk.1.attn_norm", 1, DIM);
    CHECK(n == m.find("model.layers.1.input_layernorm.weight")->v);
  }
}

TEST_CASE("hf import: Qwen2 biases, Qwen3 q/k norms", "[hf_import]") {
  for (const char* arch : {"Qwen2ForCausalLM", "Qwen3ForCausalLM"}) {
    INFO(arch);
    const bool qwen2 = std::strcmp(arch, "Qwen2ForCausalLM") == 0;
    ml_test_dir d;
    model_dir m = tiny_llama();
    m.config = set_key(set_key(m.config, "architectures", std::string("[\"") + arch + "\"]"), "model_type",
                       qwen2 ? "\"qwen2\"" : "\"qwen3\"");
    for (int l = 0; l < 2; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
      if (qwen2) {
        m.ts.push_back(make(p + "q_proj.bias", {64}));
        m.ts.push_back(make(p + "k_proj.bias", {32}));
        m.ts.push_back(make(p + "v_proj.bias", {32}));
      } else {
        m.ts.push_back(make(p + "q_norm.weight", {16}));
        m.ts.push_back(make(p + "k_norm.weight", {16}));
      }
    }
    m.write(d);
    const convert_result r = convert(d.p.string(), d / "out.mlb");
    INFO(r.msg);
    REQUIRE(r.s == ML_OK);
    mlb_file f(d / "out.mlb");
    const std::string p = "model.layers.1.self_attn.";
    if (qwen2) {
      CHECK(f.values("blk.1.attn_q.bias", 1, 64) == m.find(p + "q_proj.bias")->v);
      CHECK(f.values("blk.1.attn_k.bias", 1, 32) == m.find(p + "k_proj.bias")->v);
      CHECK(f.values("blk.1.attn_v.bias", 1, 32) == m.find(p + "v_proj.bias")->v);
      CHECK_FALSE(f.has("blk.1.attn_q_norm"));
    } else {
      // Qwen3's RMSNorm multiplies by w (no 1 + w).
      CHECK(f.values("blk.1.attn_q_norm", 1, 16) == m.find(p + "q_norm.weight")->v);
      CHECK(f.values("blk.1.attn_k_norm", 1, 16) == m.find(p + "k_norm.weight")->v);
      CHECK_FALSE(f.has("blk.1.attn_q.bias"));
    }
  }
}

TEST_CASE("hf import: Gemma 3 stores 1 + w for every norm and maps the four layer norms", "[hf_import]") {
  ml_test_dir d;
  model_dir m;
  m.config = "{\"architectures\":[\"Gemma3ForCausalLM\"],\"model_type\":\"gemma3_text\",\"hidden_size\":64,"
             "\"intermediate_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
             "\"head_dim\":32,\"vocab_size\":2048,\"max_position_embeddings\":128,\"sliding_window\":16,"
             "\"sliding_window_pattern\":2,\"hidden_activation\":\"gelu_pytorch_tanh\"}";
  m.ts.push_back(make("model.embed_tokens.weight", {VOCAB, DIM}, "BF16"));
  const char* norms[] = {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                         "post_feedforward_layernorm"};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* n : norms) m.ts.push_back(make(p + n + ".weight", {DIM}, "BF16"));
    m.ts.push_back(make(p + "self_attn.q_proj.weight", {64, DIM}, "BF16"));
    m.ts.push_back(make(p + "self_attn.k_proj.weight", {32, DIM}, "BF16"));
    m.ts.push_back(make(p + "self_attn.v_proj.weight", {32, DIM}, "BF16"));
    m.ts.push_back(make(p + "self_attn.o_proj.weight", {DIM, 64}, "BF16"));
    m.ts.push_back(make(p + "self_attn.q_norm.weight", {32}, "BF16"));
    m.ts.push_back(make(p + "self_attn.k_norm.weight", {32}, "BF16"));
    m.ts.push_back(make(p + "mlp.gate_proj.weight", {64, DIM}, "BF16"));
    m.ts.push_back(make(p + "mlp.up_proj.weight", {64, DIM}, "BF16"));
    m.ts.push_back(make(p + "mlp.down_proj.weight", {DIM, 64}, "BF16"));
  }
  m.ts.push_back(make("model.norm.weight", {DIM}, "BF16"));
  m.write(d);
  const convert_result r = convert(d.p.string(), d / "out.mlb");
  INFO(r.msg);
  REQUIRE(r.s == ML_OK);
  mlb_file f(d / "out.mlb");
  CHECK(f.m.h.arch == ML_ARCH_GEMMA3);
  CHECK(f.m.h.flags == (ML_FLAG_POST_NORMS | ML_FLAG_QK_NORM | ML_FLAG_TIED_CLASSIFIER));
  CHECK_FALSE(f.has("output"));
  const std::string p = "model.layers.1.";
  CHECK(f.values("blk.1.attn_norm", 1, DIM) == plus_one(m.find(p + "input_layernorm.weight")->v));
  CHECK(f.values("blk.1.post_attention_norm", 1, DIM) == plus_one(m.find(p + "post_attention_layernorm.weight")->v));
  CHECK(f.values("blk.1.ffn_norm", 1, DIM) == plus_one(m.find(p + "pre_feedforward_layernorm.weight")->v));
  CHECK(f.values("blk.1.post_ffw_norm", 1, DIM) == plus_one(m.find(p + "post_feedforward_layernorm.weight")->v));
  CHECK(f.values("blk.1.attn_q_norm", 1, 32) == plus_one(m.find(p + "self_attn.q_norm.weight")->v));
  CHECK(f.values("blk.1.attn_k_norm", 1, 32) == plus_one(m.find(p + "self_attn.k_norm.weight")->v));
  CHECK(f.values("output_norm", 1, DIM) == plus_one(m.find("model.norm.weight")->v));
  expect_tensor(f, "blk.0.attn_q", 64, DIM, m.find("model.layers.0.self_attn.q_proj.weight")->v, 64, DIM);
}

TEST_CASE("hf import: Qwen3.5 (multimodal checkpoint) splits q_proj, maps the gated delta tensors", "[hf_import]") {
  // Layer 0 linear attention, layer 1 full attention (period 2). dim 64, 2 heads of 32, 1 KV head;
  // linear: 2 key heads and 4 value heads of 16, conv 4: ch = 2*2*16 + 4*16 = 128.
  ml_test_dir d;
  model_dir m;
  m.config = "{\"architectures\":[\"Qwen3_5ForConditionalGeneration\"],\"model_type\":\"qwen3_5\","
             "\"tie_word_embeddings\":true,\"text_config\":{\"model_type\":\"qwen3_5_text\",\"hidden_size\":64,"
             "\"num_hidden_layers\":2,\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":32,"
             "\"intermediate_size\":64,\"vocab_size\":2048,\"max_position_embeddings\":256,\"rms_norm_eps\":1e-06,"
             "\"layer_types\":[\"linear_attention\",\"full_attention\"],\"full_attention_interval\":2,"
             "\"linear_num_key_heads\":2,\"linear_num_value_heads\":4,\"linear_key_head_dim\":16,"
             "\"linear_value_head_dim\":16,\"linear_conv_kernel_dim\":4,\"partial_rotary_factor\":0.25,"
             "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000000,\"mrope_section\":[11,11,10]}}}";
  const std::string P = "model.language_model.";
  m.ts.push_back(make(P + "embed_tokens.weight", {VOCAB, DIM}, "F16"));
  for (int l = 0; l < 2; ++l) {
    const std::string p = P + "layers." + std::to_string(l) + ".";
    m.ts.push_back(make(p + "input_layernorm.weight", {DIM}, "F16"));
    m.ts.push_back(make(p + "post_attention_layernorm.weight", {DIM}, "F16"));
    m.ts.push_back(make(p + "mlp.gate_proj.weight", {64, DIM}, "F16"));
    m.ts.push_back(make(p + "mlp.up_proj.weight", {64, DIM}, "F16"));
    m.ts.push_back(make(p + "mlp.down_proj.weight", {DIM, 64}, "F16"));
  }
  const std::string a = P + "layers.0.linear_attn.";
  m.ts.push_back(make(a + "in_proj_qkv.weight", {128, DIM}, "F16"));
  m.ts.push_back(make(a + "in_proj_z.weight", {64, DIM}, "F16"));
  m.ts.push_back(make(a + "in_proj_b.weight", {4, DIM}, "F16"));
  m.ts.push_back(make(a + "in_proj_a.weight", {4, DIM}, "F16"));
  m.ts.push_back(make(a + "conv1d.weight", {128, 1, 4}, "F32"));
  m.ts.push_back(make(a + "A_log", {4}, "F32", 2.0f));
  m.ts.push_back(make(a + "dt_bias", {4}, "F32"));
  m.ts.push_back(make(a + "norm.weight", {16}, "F32"));
  m.ts.push_back(make(a + "out_proj.weight", {DIM, 64}, "F16"));
  const std::string s = P + "layers.1.self_attn.";
  m.ts.push_back(make(s + "q_proj.weight", {128, DIM}, "F16"));  // 2 heads x (32 query + 32 gate rows)
  m.ts.push_back(make(s + "k_proj.weight", {32, DIM}, "F16"));
  m.ts.push_back(make(s + "v_proj.weight", {32, DIM}, "F16"));
  m.ts.push_back(make(s + "o_proj.weight", {DIM, 64}, "F16"));
  m.ts.push_back(make(s + "q_norm.weight", {32}, "F16"));
  m.ts.push_back(make(s + "k_norm.weight", {32}, "F16"));
  m.ts.push_back(make(P + "norm.weight", {DIM}, "F16"));
  m.ts.push_back(make("model.visual.blocks.0.attn.qkv.weight", {96, 32}, "BF16"));
  m.ts.push_back(make("model.visual.patch_embed.proj.weight", {4, 3, 2, 2, 2}, "BF16"));
  m.ts.push_back(make("mtp.fc.weight", {64, 128}, "BF16"));
  m.write(d);
  const convert_result r = convert(d.p.string(), d / "out.mlb");
  INFO(r.msg);
  REQUIRE(r.s == ML_OK);
  REQUIRE(r.notes.size() == 2);
  CHECK(r.notes[0].find("skipped 2 tensors of the vision tower") != std::string::npos);
  CHECK(r.notes[1].find("skipped 1 tensors of the multi-token prediction head") != std::string::npos);
  mlb_file f(d / "out.mlb");
  CHECK(f.m.h.arch == ML_ARCH_QWEN35);
  CHECK(f.m.h.linear_period == 2);
  CHECK(f.m.h.n_rot == 8);
  CHECK(f.m.h.rope_theta == 1e7f);
  CHECK_FALSE(f.has("output"));
  // Linear layer 0.
  CHECK(f.values("blk.0.attn_norm", 1, DIM) == plus_one(m.find(P + "layers.0.input_layernorm.weight")->v));
  CHECK(f.values("blk.0.ffn_norm", 1, DIM) == plus_one(m.find(P + "layers.0.post_attention_layernorm.weight")->v));
  expect_tensor(f, "blk.0.attn_qkv", 128, DIM, m.find(a + "in_proj_qkv.weight")->v, 128, DIM);
  expect_tensor(f, "blk.0.attn_gate", 64, DIM, m.find(a + "in_proj_z.weight")->v, 64, DIM);
  expect_tensor(f, "blk.0.ssm_beta", 4, DIM, m.find(a + "in_proj_b.weight")->v, 4, DIM);
  expect_tensor(f, "blk.0.ssm_alpha", 4, DIM, m.find(a + "in_proj_a.weight")->v, 4, DIM);
  expect_tensor(f, "blk.0.ssm_out", DIM, 64, m.find(a + "out_proj.weight")->v, DIM, 64);
  CHECK(f.values("blk.0.ssm_conv1d", 128, 4) == m.find(a + "conv1d.weight")->v);
  std::vector<float> A = m.find(a + "A_log")->v;
  for (float& x : A) x = (float)-std::exp((double)x);
  CHECK(f.values("blk.0.ssm_a", 1, 4) == A);
  CHECK(f.values("blk.0.ssm_dt", 1, 4) == m.find(a + "dt_bias")->v);
  CHECK(f.values("blk.0.ssm_norm", 1, 16) == m.find(a + "norm.weight")->v);  // plain w: the gated norm
  CHECK_FALSE(f.has("blk.0.attn_q"));
  // Full-attention layer 1: q_proj's rows per head are [32 query rows; 32 gate rows].
  const std::vector<float>& q = m.find(s + "q_proj.weight")->v;
  std::vector<float> wq, wg;
  for (int h = 0; h < 2; ++h) {
    wq.insert(wq.end(), q.begin() + (2 * h) * 32 * DIM, q.begin() + (2 * h + 1) * 32 * DIM);
    wg.insert(wg.end(), q.begin() + (2 * h + 1) * 32 * DIM, q.begin() + (2 * h + 2) * 32 * DIM);
  }
  expect_tensor(f, "blk.1.attn_q", 64, DIM, wq, 64, DIM);
  expect_tensor(f, "blk.1.attn_gate", 64, DIM, wg, 64, DIM);
  expect_tensor(f, "blk.1.attn_k", 32, DIM, m.find(s + "k_proj.weight")->v, 32, DIM);
  CHECK(f.values("blk.1.attn_q_norm", 1, 32) == plus_one(m.find(s + "q_norm.weight")->v));
  CHECK(f.values("blk.1.attn_k_norm", 1, 32) == plus_one(m.find(s + "k_norm.weight")->v));
  CHECK(f.values("output_norm", 1, DIM) == plus_one(m.find(P + "norm.weight")->v));
  CHECK_FALSE(f.has("blk.1.ssm_a"));
}

TEST_CASE("hf import: generation_config.json goes into the model and its eos ids end generation", "[hf_import]") {
  ml_test_dir d;
  model_dir m = tiny_llama();
  m.write(d);
  ml_test_write(d / "generation_config.json", "{\"bos_token_id\":1,\"eos_token_id\":[2,7,9]}");
  REQUIRE(convert(d.p.string(), d / "out.mlb").s == ML_OK);
  mlb_file f(d / "out.mlb");
  REQUIRE(f.m.tokenizer_kind == 2);
  ml_hf_files files;
  ml_error err;
  REQUIRE(ml_hf_bundle_parse(f.m.tokenizer, f.m.tokenizer_size, &files, &err) == ML_OK);
  REQUIRE(files.generation_json != nullptr);
  CHECK(std::string(files.generation_json, files.generation_json_len) == "{\"bos_token_id\":1,\"eos_token_id\":[2,7,9]}");
  ml_tokenizer* t = nullptr;
  REQUIRE(ml_tokenizer_load_hf(&t, &files, &err) == ML_OK);
  CHECK(ml_tokenizer_is_eog(t, 7));
  CHECK(ml_tokenizer_is_eog(t, 9));
  CHECK_FALSE(ml_tokenizer_is_eog(t, 8));
  ml_tokenizer_free(t);
}

TEST_CASE("hf import: cv_hf_memory and a conversion at load (cv_hf_opts::mem) give the bytes cv_hf writes", "[hf_import]") {
  ml_test_dir d;
  model_dir m = tiny_llama("BF16");
  m.write(d);
  REQUIRE(convert(d.p.string(), d / "out.mlb").s == ML_OK);
  const std::vector<uint8_t> want = ml_test_read(d / "out.mlb");
  cv_hf_opts o = cv_hf_defaults();
  const std::string dir = d.p.string();
  o.dir = dir.c_str();
  uint8_t* bytes = nullptr;
  size_t size = 0;
  ml_error err;
  REQUIRE(cv_hf_memory(&o, &bytes, &size, &err) == ML_OK);
  CHECK(std::vector<uint8_t>(bytes, bytes + size) == want);
  ml_aligned_free(bytes);
  cv_mem_out out = converted_out();  // the unlinked temporary file where files are mapped
  o.mem = &out;
  REQUIRE(cv_hf(&o, &err) == ML_OK);
  CHECK(converted_bytes(&out) == want);
  o.mem = nullptr;
  fs::remove(d / "config.json");
  CHECK(cv_hf_memory(&o, &bytes, &size, &err) == ML_E_IO);
}

TEST_CASE("hf import: a sharded checkpoint gives the same file as a single one", "[hf_import]") {
  ml_test_dir d1, d2;
  model_dir m = tiny_llama();
  m.write(d1);
  REQUIRE(convert(d1.p.string(), d1 / "out.mlb").s == ML_OK);
  m.write(d2);
  fs::remove(d2 / "model.safetensors");
  const std::vector<tensor> a(m.ts.begin(), m.ts.begin() + 7), b(m.ts.begin() + 7, m.ts.end());
  ml_test_write(d2 / "model-00001-of-00002.safetensors", st_file(a));
  ml_test_write(d2 / "model-00002-of-00002.safetensors", st_file(b));
  std::string idx = "{\"metadata\":{\"total_size\":1},\"weight_map\":{";
  for (size_t i = 0; i < m.ts.size(); ++i)
    idx += (i ? "," : "") + std::string("\"") + m.ts[i].name + "\":\"model-0000" + (i < 7 ? "1" : "2") + "-of-00002.safetensors\"";
  ml_test_write(d2 / "model.safetensors.index.json", idx + "}}");
  const convert_result r = convert(d2.p.string(), d2 / "out.mlb");
  INFO(r.msg);
  REQUIRE(r.s == ML_OK);
  CHECK(ml_test_read(d1 / "out.mlb") == ml_test_read(d2 / "out.mlb"));
}
