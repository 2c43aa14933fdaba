// The public API's converters (krafla.h, "Converting") over the converter library (src/convert).
#include "convert/convert.h"
#include "convert/hf_config.h"
#include "krafla.h"

extern "C" {

ml_convert_llama2c_params ml_convert_llama2c_defaults(void) {
  const cv_llama2c_opts d = cv_llama2c_defaults();
  ml_convert_llama2c_params p{};
  p.wtype = (int)d.wtype;
  p.scales_f16 = d.scale_type == ML_SCALE_F16;
  return p;
}

ml_convert_random_params ml_convert_random_defaults(void) {
  const cv_random_opts d = cv_random_defaults();
  ml_convert_random_params p{};
  p.seed = d.seed;
  p.wtype = (int)d.wtype;
  p.scales_f16 = d.scale_type == ML_SCALE_F16;
  p.tied = d.tied;
  p.rope_half = d.rope_type == ML_ROPE_HALF;
  p.rope_theta = d.rope_theta;
  return p;
}

ml_status ml_convert_llama2c(const ml_convert_llama2c_params* p, ml_error* err) {
  cv_llama2c_opts o = cv_llama2c_defaults();
  o.checkpoint = p->checkpoint;
  o.tokenizer = p->tokenizer;
  o.chat_template = p->chat_template;
  o.out = p->out;
  o.wtype = (uint32_t)p->wtype;
  o.scale_type = p->scales_f16 ? ML_SCALE_F16 : ML_SCALE_F32;
  return cv_llama2c(&o, err);
}

ml_status ml_convert_random(const ml_convert_random_params* p, ml_error* err) {
  cv_random_opts o = cv_random_defaults();
  o.dim = p->dim;
  o.hidden = p->hidden;
  o.layers = p->layers;
  o.heads = p->heads;
  o.kv_heads = p->kv_heads;
  o.vocab = p->vocab;
  o.max_seq = p->max_seq;
  o.head_dim = p->head_dim;
  o.seed = p->seed;
  o.wtype = (uint32_t)p->wtype;
  o.scale_type = p->scales_f16 ? ML_SCALE_F16 : ML_SCALE_F32;
  o.tied = p->tied;
  o.rope_type = p->rope_half ? ML_ROPE_HALF : ML_ROPE_INTERLEAVED;
  o.rope_theta = p->rope_theta;
  o.tokenizer = p->tokenizer;
  o.chat_template = p->chat_template;
  o.out = p->out;
  o.gguf = p->gguf;
  ml_mlb_header config;
  if (p->config) {
    ML_TRY(cv_hf_config_read(p->config, nullptr, &config, err));
    o.config = &config;
  }
  return cv_random(&o, err);
}

ml_convert_hf_params ml_convert_hf_defaults(void) {
  const cv_hf_opts d = cv_hf_defaults();
  ml_convert_hf_params p{};
  p.wtype = (int)d.wtype;
  p.scales_f16 = d.scale_type == ML_SCALE_F16;
  return p;
}

ml_status ml_convert_hf(const ml_convert_hf_params* p, ml_error* err) {
  cv_hf_opts o = cv_hf_defaults();
  o.dir = p->dir;
  o.chat_template = p->chat_template;
  o.out = p->out;
  o.wtype = (uint32_t)p->wtype;
  o.scale_type = p->scales_f16 ? ML_SCALE_F16 : ML_SCALE_F32;
  o.note = p->note;
  o.note_user = p->note_user;
  return cv_hf(&o, err);
}

ml_convert_gguf_params ml_convert_gguf_defaults(void) { return ml_convert_gguf_params{}; }

ml_status ml_convert_gguf(const ml_convert_gguf_params* p, ml_error* err) {
  cv_gguf_opts o = cv_gguf_defaults();
  o.path = p->path;
  o.out = p->out;
  o.wtype = (uint32_t)p->wtype;
  o.chat_template = p->chat_template;
  o.warn = p->warn;
  o.warn_user = p->warn_user;
  return cv_gguf(&o, err);
}

}  // extern "C"
