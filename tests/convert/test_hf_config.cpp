// config.json into the .mlb header (convert/hf_config.h): the real files in shared/data/hf, checked
// by hand against them (and transformers' defaults where a key is absent).
#include "hf_fixture.h"  // Catch2, the converter, the .mlb reader, test_util.h

using namespace hf_test;

// --- config.json ---------------------------------------------------------------------------------

TEST_CASE("hf config: Llama 3.2 1B, with its llama3 RoPE scaling", "[hf_import]") {
  const ml_mlb_header h = read_config("llama-3.2-1b-instruct/config.json", "llama-3.2-1b-instruct/generation_config.json");
  CHECK(h.arch == ML_ARCH_LLAMA);
  CHECK(h.dim == 2048);
  CHECK(h.hidden_dim == 8192);
  CHECK(h.hidden_dim_orig == 8192);
  CHECK(h.n_layers == 16);
  CHECK(h.n_heads == 32);
  CHECK(h.n_kv_heads == 8);
  CHECK(h.head_dim == 64);
  CHECK(h.vocab_size == 128256);
  CHECK(h.max_seq == 131072);
  CHECK(h.norm_eps == 1e-5f);
  CHECK(h.rope_theta == 500000.0f);
  CHECK(h.rope_type == ML_ROPE_HALF);
  CHECK(h.rope_scaling == ML_ROPE_SCALING_LLAMA3);
  CHECK(h.rope_factor == 32.0f);
  CHECK(h.rope_low_freq_factor == 1.0f);
  CHECK(h.rope_high_freq_factor == 4.0f);
  CHECK(h.rope_orig_max_seq == 8192);
  CHECK(h.flags == ML_FLAG_TIED_CLASSIFIER);
  CHECK(h.activation == ML_ACT_SILU);
  CHECK(h.embed_scale == 1.0f);
  CHECK(h.sliding_window == 0);
  CHECK(h.bos_id == 128000);
  CHECK(h.eos_id == 128001);  // the first of [128001, 128008, 128009]
  CHECK(h.n_rot == 0);
  CHECK(h.attn_scale == 0.0f);
}

TEST_CASE("hf config: Qwen2.5 0.5B has q/k/v biases and no sliding window", "[hf_import]") {
  const ml_mlb_header h = read_config("qwen2.5-0.5b-instruct/config.json", "qwen2.5-0.5b-instruct/generation_config.json");
  CHECK(h.arch == ML_ARCH_QWEN2);
  CHECK(h.dim == 896);
  CHECK(h.hidden_dim == 4864);
  CHECK(h.n_layers == 24);
  CHECK(h.n_heads == 14);
  CHECK(h.n_kv_heads == 2);
  CHECK(h.head_dim == 64);
  CHECK(h.vocab_size == 151936);
  CHECK(h.max_seq == 32768);
  CHECK(h.norm_eps == 1e-6f);
  CHECK(h.rope_theta == 1e6f);
  CHECK(h.rope_scaling == ML_ROPE_SCALING_NONE);
  CHECK(h.flags == (ML_FLAG_QKV_BIAS | ML_FLAG_TIED_CLASSIFIER));
  CHECK(h.sliding_window == 0);  // sliding_window 32768 but use_sliding_window false
  CHECK(h.bos_id == 151643);
  CHECK(h.eos_id == 151645);
}

TEST_CASE("hf config: Qwen3 0.6B has q/k norms and head_dim 128 != dim/heads", "[hf_import]") {
  const ml_mlb_header h = read_config("qwen3-0.6b/config.json");
  CHECK(h.arch == ML_ARCH_QWEN3);
  CHECK(h.dim == 1024);
  CHECK(h.hidden_dim == 3072);
  CHECK(h.n_layers == 28);
  CHECK(h.n_heads == 16);
  CHECK(h.n_kv_heads == 8);
  CHECK(h.head_dim == 128);
  CHECK(h.vocab_size == 151936);
  CHECK(h.max_seq == 40960);
  CHECK(h.rope_theta == 1e6f);
  CHECK(h.flags == (ML_FLAG_QK_NORM | ML_FLAG_TIED_CLASSIFIER));
}

TEST_CASE("hf config: Gemma 3 1B (reconstructed config)", "[hf_import]") {
  const ml_mlb_header h = read_config("gemma-3-1b-it/config.json");
  CHECK(h.arch == ML_ARCH_GEMMA3);
  CHECK(h.dim == 1152);
  CHECK(h.hidden_dim == 6912);
  CHECK(h.n_layers == 26);
  CHECK(h.n_heads == 4);
  CHECK(h.n_kv_heads == 1);
  CHECK(h.head_dim == 256);
  CHECK(h.vocab_size == 262144);
  CHECK(h.max_seq == 32768);
  CHECK(h.activation == ML_ACT_GELU_TANH);
  CHECK(h.embed_scale == Approx(33.941125).epsilon(1e-7));  // sqrt(1152)
  // tie_word_embeddings is absent: Gemma3TextConfig's default is true.
  CHECK(h.flags == (ML_FLAG_POST_NORMS | ML_FLAG_QK_NORM | ML_FLAG_TIED_CLASSIFIER));
  CHECK(h.attn_scale == 0.0625f);  // query_pre_attn_scalar 256
  CHECK(h.sliding_window == 512);
  CHECK(h.sliding_pattern == 6);
  CHECK(h.rope_theta == 1e6f);
  CHECK(h.rope_local_theta == 10000.0f);
  CHECK(h.logit_softcap == 0.0f);  // final_logit_softcapping null
  CHECK(h.norm_eps == 1e-6f);
  CHECK(h.bos_id == 2);
  CHECK(h.eos_id == 1);
}

TEST_CASE("hf config: Qwen3.5 0.8B (nested text_config, reconstructed)", "[hf_import]") {
  const ml_mlb_header h = read_config("qwen3.5-0.8b/config.reconstructed.json");
  CHECK(h.arch == ML_ARCH_QWEN35);
  CHECK(h.dim == 1024);
  CHECK(h.hidden_dim == 3584);
  CHECK(h.n_layers == 24);
  CHECK(h.n_heads == 8);
  CHECK(h.n_kv_heads == 2);
  CHECK(h.head_dim == 256);
  CHECK(h.vocab_size == 248320);
  CHECK(h.max_seq == 262144);
  CHECK(h.linear_period == 4);
  CHECK(h.linear_k_heads == 16);
  CHECK(h.linear_v_heads == 16);
  CHECK(h.linear_k_dim == 128);
  CHECK(h.linear_v_dim == 128);
  CHECK(h.linear_conv == 4);
  CHECK(h.n_rot == 64);  // 256 x 0.25
  CHECK(h.rope_theta == 1e7f);
  CHECK(h.flags == (ML_FLAG_QK_NORM | ML_FLAG_ATTN_GATE | ML_FLAG_TIED_CLASSIFIER));
  CHECK(h.eos_id == 248044);
}

TEST_CASE("hf config: SmolLM2 135M and TinyLlama 1.1B", "[hf_import]") {
  const ml_mlb_header s = read_config("smollm2-135m-instruct/config.json");
  CHECK(s.arch == ML_ARCH_LLAMA);
  CHECK(s.dim == 576);
  CHECK(s.hidden_dim == 1536);
  CHECK(s.n_layers == 30);
  CHECK(s.n_heads == 9);
  CHECK(s.n_kv_heads == 3);
  CHECK(s.head_dim == 64);
  CHECK(s.vocab_size == 49152);
  CHECK(s.max_seq == 8192);
  CHECK(s.rope_theta == 100000.0f);
  CHECK(s.flags == ML_FLAG_TIED_CLASSIFIER);
  const ml_mlb_header t = read_config("tinyllama-1.1b-chat-v1.0/config.json", "tinyllama-1.1b-chat-v1.0/generation_config.json");
  CHECK(t.dim == 2048);
  CHECK(t.hidden_dim == 5632);
  CHECK(t.n_layers == 22);
  CHECK(t.n_heads == 32);
  CHECK(t.n_kv_heads == 4);
  CHECK(t.vocab_size == 32000);
  CHECK(t.max_seq == 2048);
  CHECK(t.flags == 0);  // tie_word_embeddings false
  CHECK(t.bos_id == 1);
  CHECK(t.eos_id == 2);
}

TEST_CASE("hf config: defaults, padding, generation_config ids and transformers 5 rope_parameters", "[hf_import]") {
  ml_mlb_header h;
  ml_error err;
  const std::string base = "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":100,\"num_hidden_layers\":1,"
                           "\"num_attention_heads\":4,\"vocab_size\":300,\"max_position_embeddings\":64}";
  const std::string gen = "{\"bos_token_id\":7,\"eos_token_id\":[9,10]}";
  REQUIRE(cv_hf_config_parse(base.data(), base.size(), gen.data(), gen.size(), "config.json", &h, &err) == ML_OK);
  CHECK(h.hidden_dim == 128);  // 100 padded to a multiple of 32
  CHECK(h.hidden_dim_orig == 100);
  CHECK(h.n_kv_heads == 4);   // default: num_attention_heads
  CHECK(h.head_dim == 16);    // default: hidden_size / heads
  CHECK(h.flags == 0);        // LlamaConfig's tie_word_embeddings default is false
  CHECK(h.norm_eps == 1e-6f);
  CHECK(h.rope_theta == 10000.0f);
  CHECK(h.bos_id == 7);
  CHECK(h.eos_id == 9);
  const std::string v5 = set_key(base, "rope_parameters",
                                 "{\"rope_type\":\"linear\",\"factor\":4.0,\"rope_theta\":250000}");
  REQUIRE(cv_hf_config_parse(v5.data(), v5.size(), nullptr, 0, "config.json", &h, &err) == ML_OK);
  CHECK(h.rope_scaling == ML_ROPE_SCALING_LINEAR);
  CHECK(h.rope_factor == 4.0f);
  CHECK(h.rope_theta == 250000.0f);
  CHECK(h.bos_id == 0);  // no ids anywhere
  const std::string mistral = set_key(set_key(base, "model_type", "\"mistral\""), "sliding_window", "4096");
  REQUIRE(cv_hf_config_parse(mistral.data(), mistral.size(), nullptr, 0, "config.json", &h, &err) == ML_OK);
  CHECK(h.sliding_window == 4096);
  CHECK(h.sliding_pattern == 0);
  // Gemma 3 with layer_types instead of sliding_window_pattern, and transformers 5's per-kind RoPE.
  const std::string gemma =
      "{\"model_type\":\"gemma3_text\",\"hidden_size\":64,\"intermediate_size\":64,\"num_hidden_layers\":4,"
      "\"num_attention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":32,\"vocab_size\":300,\"max_position_embeddings\":64,"
      "\"layer_types\":[\"sliding_attention\",\"full_attention\",\"sliding_attention\",\"full_attention\"],"
      "\"query_pre_attn_scalar\":16,\"final_logit_softcapping\":30.0,"
      "\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"default\",\"rope_theta\":1000000.0},"
      "\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":10000.0}}}";
  REQUIRE(cv_hf_config_parse(gemma.data(), gemma.size(), nullptr, 0, "config.json", &h, &err) == ML_OK);
  CHECK(h.sliding_pattern == 2);
  CHECK(h.sliding_window == 4096);  // Gemma3TextConfig's default
  CHECK(h.attn_scale == 0.25f);
  CHECK(h.logit_softcap == 30.0f);
  CHECK(h.rope_theta == 1e6f);
  CHECK(h.rope_local_theta == 1e4f);
  CHECK(h.embed_scale == 8.0f);
}
