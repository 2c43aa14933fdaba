// The Hugging Face importer on damaged folders: a table of inputs that must fail with the
// documented status and a message naming the key or tensor; the safetensors reader over memory.
#include "hf_fixture.h"  // Catch2, the converter, the .mlb reader, test_util.h

using namespace hf_test;

// --- damaged inputs ------------------------------------------------------------------------------

namespace {

struct bad_case {
  const char* what;
  std::function<void(model_dir&, const ml_test_dir&)> damage;  // applied to the folder spec, then after writing
  ml_status status;
  const char* msg;
};

std::string one_tensor_header(const std::string& entry) { return "{\"model.norm.weight\":" + entry + "}"; }

}  // namespace

TEST_CASE("hf import: damaged folders fail with a message naming the key or tensor", "[hf_import]") {
  const std::string D8(8, '\0');
  const std::vector<bad_case> cases = {
      // safetensors headers
      {"header length past the end", [](model_dir& m, const ml_test_dir&) { std::string s; put_u64(&s, 1000); m.raw = s + "{}"; },
       ML_E_FORMAT, "runs past the end of the file"},
      {"header length 1", [](model_dir& m, const ml_test_dir&) { std::string s; put_u64(&s, 1); m.raw = s + "{"; },
       ML_E_FORMAT, "header length 1 is outside"},
      {"header length above the limit", [](model_dir& m, const ml_test_dir&) { std::string s; put_u64(&s, ~0ull); m.raw = s + "{}"; },
       ML_E_FORMAT, "is outside 2.."},
      {"file of 5 bytes", [](model_dir& m, const ml_test_dir&) { m.raw = "abcde"; }, ML_E_FORMAT, "too short for the 8-byte"},
      {"header not JSON", [](model_dir& m, const ml_test_dir&) { m.raw = st_raw("{\"a\":}  ", ""); }, ML_E_FORMAT, "header: json"},
      {"header a list", [](model_dir& m, const ml_test_dir&) { m.raw = st_raw("[]", ""); }, ML_E_FORMAT,
       "the header is a array, not an object"},
      {"offsets outside the data area",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}"), D8);
       },
       ML_E_FORMAT, "data_offsets [4, 12] lie outside the data area of 8 bytes"},
      {"offsets begin > end",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}"), D8);
       },
       ML_E_FORMAT, "lie outside the data area"},
      {"overlapping tensors",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                        D8);
       },
       ML_E_FORMAT, "overlaps tensor a"},
      {"a gap between tensors",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", D8);
       },
       ML_E_FORMAT, "a gap of 4 bytes before tensor a"},
      {"bytes after the last tensor",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", D8);
       },
       ML_E_FORMAT, "4 bytes after the last tensor"},
      {"size not shape x itemsize",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "hold 8 bytes, but BF16 x 2 elements need 4"},
      {"dtype I64",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "tensor model.norm.weight: dtype I64 is not supported"},
      {"shape not a list",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "shape is missing or not a list"},
      {"negative dimension",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "shape[0] is not an integer"},
      {"rank 9",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "rank 9 is above 8"},
      {"element count overflow",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "the element count overflows"},
      {"byte size overflow",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[1099511627776,8388608],\"data_offsets\":[0,8]}"), D8);
       },
       ML_E_FORMAT, "the byte size overflows"},
      {"data_offsets with three numbers",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw(one_tensor_header("{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4,8]}"), D8);
       },
       ML_E_FORMAT, "data_offsets is not a list of two"},
      {"a tensor named twice",
       [D8](model_dir& m, const ml_test_dir&) {
         m.raw = st_raw("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                        D8);
       },
       ML_E_FORMAT, "tensor a appears twice"},
      {"__metadata__ with a number", [](model_dir& m, const ml_test_dir&) { m.meta = "{\"format\":1}"; }, ML_E_FORMAT,
       "__metadata__.format is not a string"},
      {"a tensor entry that is a string",
       [](model_dir& m, const ml_test_dir&) { m.raw = st_raw("{\"a\":\"x\"}", ""); }, ML_E_FORMAT,
       "tensor a: the entry is a string"},
      // the model's tensors
      {"a missing tensor", [](model_dir& m, const ml_test_dir&) { m.drop("model.layers.1.mlp.up_proj.weight"); }, ML_E_FORMAT,
       "tensor model.layers.1.mlp.up_proj.weight is missing"},
      {"a transposed matrix",
       [](model_dir& m, const ml_test_dir&) { m.find("model.layers.0.self_attn.k_proj.weight")->shape = {64, 32}; }, ML_E_SHAPE,
       "tensor model.layers.0.self_attn.k_proj.weight has shape [64, 32], but config.json implies [32, 64]"},
      {"a rank-3 matrix",
       [](model_dir& m, const ml_test_dir&) { m.find("model.layers.0.self_attn.q_proj.weight")->shape = {4, 16, 64}; },
       ML_E_SHAPE, "q_proj.weight has shape [4, 16, 64]"},
      {"a norm of the wrong width", [](model_dir& m, const ml_test_dir&) { m.find("model.norm.weight")->v.resize(32), m.find("model.norm.weight")->shape = {32}; },
       ML_E_SHAPE, "model.norm.weight has shape [32], but config.json implies [64]"},
      {"an embedding with fewer rows than vocab_size",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "vocab_size", "4096"); }, ML_E_SHAPE,
       "model.embed_tokens.weight has shape [2048, 64], but config.json implies [4096, 64]"},
      {"an unknown tensor", [](model_dir& m, const ml_test_dir&) { m.ts.push_back(make("model.layers.0.mlp.gate_proj.bias", {72})); },
       ML_E_FORMAT, "tensor model.layers.0.mlp.gate_proj.bias in"},
      {"a layer beyond num_hidden_layers",
       [](model_dir& m, const ml_test_dir&) { m.ts.push_back(make("model.layers.2.input_layernorm.weight", {64})); }, ML_E_FORMAT,
       "model.layers.2.input_layernorm.weight in"},
      {"an untied model without lm_head", [](model_dir& m, const ml_test_dir&) { m.drop("lm_head.weight"); }, ML_E_FORMAT,
       "tensor lm_head.weight is missing"},
      {"a tied model whose lm_head differs",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "tie_word_embeddings", "true"); }, ML_E_FORMAT,
       "lm_head.weight differs from model.embed_tokens.weight"},
      {"a NaN weight",
       [](model_dir& m, const ml_test_dir&) { m.find("model.layers.1.self_attn.v_proj.weight")->v[70] = NAN; }, ML_E_FORMAT,
       "tensor blk.1.attn_v: value at row 1 col 6 is nan"},
      {"an infinite norm weight",
       [](model_dir& m, const ml_test_dir&) { m.find("model.norm.weight")->v[3] = INFINITY; }, ML_E_FORMAT,
       "tensor output_norm: value 3 is inf"},
      // files
      {"no weights", [](model_dir& m, const ml_test_dir&) { m.after = [](const ml_test_dir& d) { fs::remove(d / "model.safetensors"); }; }, ML_E_ARG,
       "the folder has no model.safetensors or model.safetensors.index.json"},
      {"weights in a FIFO",
       [](model_dir& m, const ml_test_dir&) { m.after = [](const ml_test_dir& d) {
         fs::remove(d / "model.safetensors");
         REQUIRE(mkfifo((d / "model.safetensors").c_str(), 0600) == 0);
       }; },
       ML_E_ARG, "FIFO"},
      {"config.json a FIFO",
       [](model_dir& m, const ml_test_dir&) { m.after = [](const ml_test_dir& d) {
         fs::remove(d / "config.json");
         REQUIRE(mkfifo((d / "config.json").c_str(), 0600) == 0);
       }; },
       ML_E_ARG, "FIFO"},
      {"no config.json", [](model_dir& m, const ml_test_dir&) { m.after = [](const ml_test_dir& d) { fs::remove(d / "config.json"); }; }, ML_E_IO, "config.json"},
      {"no tokenizer.json", [](model_dir& m, const ml_test_dir&) { m.tokenizer = false; }, ML_E_ARG, "the folder has no tokenizer.json"},
      {"an index naming a shard outside the folder",
       [](model_dir& m, const ml_test_dir&) { m.after = [](const ml_test_dir& d) {
         fs::remove(d / "model.safetensors");
         ml_test_write(d / "model.safetensors.index.json", "{\"weight_map\":{\"model.norm.weight\":\"../x.safetensors\"}}");
       }; },
       ML_E_FORMAT, "weight_map.model.norm.weight is not the name of a file in the folder"},
      {"an index naming a tensor its shard lacks",
       [](model_dir& m, const ml_test_dir&) { m.after = [ts = m.ts](const ml_test_dir& d) {
         fs::remove(d / "model.safetensors");
         ml_test_write(d / "a.safetensors", st_file(ts));
         ml_test_write(d / "model.safetensors.index.json", "{\"weight_map\":{\"model.nope\":\"a.safetensors\"}}");
       }; },
       ML_E_FORMAT, "weight_map puts tensor model.nope in a.safetensors, which does not hold it"},
      {"a shard tensor missing from the index",
       [](model_dir& m, const ml_test_dir&) { m.after = [ts = m.ts](const ml_test_dir& d) {
         fs::remove(d / "model.safetensors");
         ml_test_write(d / "a.safetensors", st_file(ts));
         ml_test_write(d / "model.safetensors.index.json", "{\"weight_map\":{\"model.norm.weight\":\"a.safetensors\"}}");
       }; },
       ML_E_FORMAT, "is not in"},
      {"an index without weight_map",
       [](model_dir& m, const ml_test_dir&) { m.after = [](const ml_test_dir& d) {
         fs::remove(d / "model.safetensors");
         ml_test_write(d / "model.safetensors.index.json", "{\"metadata\":{}}");
       }; },
       ML_E_FORMAT, "weight_map is missing or not an object"},
      // config.json
      {"an unknown architecture",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "architectures", "[\"GPT2LMHeadModel\"]"); },
       ML_E_FORMAT, "architectures[0] \"GPT2LMHeadModel\" is not supported"},
      {"an unknown model_type without architectures",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(del_key(m.config, "architectures"), "model_type", "\"phi3\""); },
       ML_E_FORMAT, "model_type \"phi3\" is not supported"},
      {"no hidden_size", [](model_dir& m, const ml_test_dir&) { m.config = del_key(m.config, "hidden_size"); }, ML_E_FORMAT,
       "config.json: hidden_size is missing"},
      {"hidden_size a string", [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "hidden_size", "\"64\""); },
       ML_E_FORMAT, "hidden_size is \"64\", not an integer"},
      {"vocab_size zero", [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "vocab_size", "0"); }, ML_E_FORMAT,
       "vocab_size is 0, not an integer in 3.."},
      {"config.json not JSON", [](model_dir& m, const ml_test_dir&) { m.config = "{\"hidden_size\": 64,"; }, ML_E_FORMAT,
       "config.json: json: byte"},
      {"config.json empty", [](model_dir& m, const ml_test_dir&) { m.config = ""; }, ML_E_FORMAT, "config.json: json"},
      {"kv heads not dividing heads",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "num_key_value_heads", "3"); }, ML_E_SHAPE,
       "num_key_value_heads 3 does not divide num_attention_heads 4"},
      {"hidden_size not a multiple of 32",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(set_key(set_key(m.config, "hidden_size", "48"), "num_attention_heads", "3"), "num_key_value_heads", "3"); },
       ML_E_SHAPE, "dim 48 is not a positive multiple of 32"},
      {"rope_scaling yarn",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "rope_scaling", "{\"rope_type\":\"yarn\",\"factor\":4.0}"); },
       ML_E_FORMAT, "rope_scaling.rope_type \"yarn\" is not supported"},
      {"llama3 scaling without low_freq_factor",
       [](model_dir& m, const ml_test_dir&) {
         m.config = set_key(m.config, "rope_scaling",
                            "{\"rope_type\":\"llama3\",\"factor\":8.0,\"high_freq_factor\":4.0,"
                            "\"original_max_position_embeddings\":8192}");
       },
       ML_E_FORMAT, "rope_scaling.low_freq_factor is missing"},
      {"attention_bias on a Llama", [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "attention_bias", "true"); },
       ML_E_FORMAT, "attention_bias is true"},
      {"another activation", [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "hidden_act", "\"gelu\""); },
       ML_E_FORMAT, "hidden_act \"gelu\" is not supported"},
      {"tie_word_embeddings a string",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "tie_word_embeddings", "\"yes\""); }, ML_E_FORMAT,
       "tie_word_embeddings is \"yes\", not true or false"},
      {"Qwen3.5 without text_config",
       [](model_dir& m, const ml_test_dir&) {
         m.config = set_key(set_key(m.config, "architectures", "[\"Qwen3_5ForConditionalGeneration\"]"), "model_type", "\"qwen3_5\"");
       },
       ML_E_FORMAT, "text_config is missing"},
      {"Gemma 3 layer_types out of pattern",
       [](model_dir& m, const ml_test_dir&) {
         m.config = set_key(set_key(m.config, "architectures", "[\"Gemma3ForCausalLM\"]"), "layer_types",
                            "[\"full_attention\",\"sliding_attention\"]");
       },
       ML_E_FORMAT, "layer_types[1] is \"sliding_attention\": the layers do not repeat with period 1"},
      {"Qwen2 with use_sliding_window",
       [](model_dir& m, const ml_test_dir&) {
         m.config = set_key(set_key(m.config, "architectures", "[\"Qwen2ForCausalLM\"]"), "use_sliding_window", "true");
       },
       ML_E_FORMAT, "use_sliding_window is true"},
      {"a pre-quantized checkpoint",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "quantization_config", "{\"quant_method\":\"gptq\"}"); },
       ML_E_FORMAT, "quantization_config is set"},
      {"an eos_token_id that is not an id",
       [](model_dir& m, const ml_test_dir&) { m.config = set_key(m.config, "eos_token_id", "[\"x\"]"); }, ML_E_FORMAT,
       "eos_token_id[0] is \"x\", not a token id"},
  };
  REQUIRE(cases.size() >= 40);
  for (const bad_case& c : cases) {
    INFO("case: " << c.what);
    ml_test_dir d;
    model_dir m = tiny_llama();
    c.damage(m, d);  // changes to the spec, or (m.after) to the written files
    m.write(d);
    const convert_result r = convert(d.p.string(), d / "out.mlb");
    INFO("message: " << r.msg);
    CHECK(r.s == c.status);
    CHECK(r.msg.find(c.msg) != std::string::npos);
    CHECK_FALSE(fs::exists(d / "out.mlb"));
  }
}

TEST_CASE("hf import: safetensors reader over memory (lookup, metadata, exact widening)", "[hf_import]") {
  tensor a = make("a", {2, 3}, "F32"), b = make("b", {4}, "BF16"), c = make("c", {2}, "F16"), e;
  e.name = "empty";
  e.shape = {0, 5};
  const std::string s = st_file({b, a, e, c}, "{\"format\":\"pt\"}");
  cv_st_file f;
  ml_error err;
  REQUIRE(cv_st_parse(&f, reinterpret_cast<const uint8_t*>(s.data()), s.size(), "mem", &err) == ML_OK);
  CHECK(f.n == 4);
  CHECK(std::string(cv_st_metadata(&f, "format")) == "pt");
  CHECK(cv_st_metadata(&f, "nope") == nullptr);
  CHECK(cv_st_find(&f, "zzz") == nullptr);
  for (const tensor* t : {&a, &b, &c}) {
    const cv_st_tensor* x = cv_st_find(&f, t->name.c_str());
    REQUIRE(x);
    CHECK(x->rank == t->shape.size());
    cv_buf v;
    REQUIRE(cv_st_to_f32(x, &v, &err) == ML_OK);
    CHECK(std::vector<float>(v.as<float>(), v.as<float>() + x->count) == t->v);
  }
  const cv_st_tensor* z = cv_st_find(&f, "empty");
  REQUIRE(z);
  CHECK(z->count == 0);
}
