// ml_convert: converts models to krafla's .mlb format (docs/user-guide.md, "ml_convert").
//   ml_convert llama2c CHECKPOINT.bin --tokenizer TOKENIZER -o OUT.mlb [--wtype q8|q4] [--scales f32|f16]
//                      [--chat-template FILE]     (TOKENIZER: tokenizer.bin, an HF folder or tokenizer.json)
//   ml_convert random --dim D --hidden H --layers L --heads N --kv-heads K --vocab V --max-seq S
//                     [--head-dim HD] [--seed X] [--wtype q8|q4] [--scales f32|f16] [--tied]
//                     [--rope-type interleaved|half] [--rope-theta T] [--tokenizer FILE [--chat-template F]] -o OUT.mlb
//                     [--gguf OUT.gguf]   (the same model as GGUF for llama.cpp; src/convert/gguf_write.h)
//   ml_convert random --config config.json [--layers N] [--vocab V] [any shape option] ... -o OUT.mlb
//                     (a Hugging Face config's architecture and shape; the options given override it)
//   ml_convert hf DIR -o OUT.mlb [--wtype q8|q4] [--scales f32|f16] [--chat-template FILE]
//                     (DIR: a Hugging Face model folder: config.json, *.safetensors, tokenizer.json)
//   ml_convert gguf FILE.gguf -o OUT.mlb [--wtype q8|q4] [--chat-template FILE]
// Exit codes: 0 ok (and --help), 2 bad usage or bad input contents (an input that is not a regular
// file, an output that is a directory, a device or one of the inputs), 1 I/O and other failures.
// Killed by a signal while writing, it removes its temporary file and dies of that signal.
// Every message goes to stderr, prefixed "ml_convert: ". The converting is src/convert
// (ml_convert_lib), which reports out-of-memory as ML_E_NOMEM like every other failure.
#include <cstdio>
#include <string>

#include "cli/cli.h"
#include "krafla.h"

namespace {

int wtype_of(const std::string& s) { return s == "q4" ? ML_DT_Q4 : ML_DT_Q8; }

void print_note(void*, const char* msg) { std::fprintf(stderr, "ml_convert: note: %s\n", msg); }

}  // namespace

int ml_main(int argc, char** argv) {
  ml_install_cleanup_handlers();  // SIGTERM/SIGINT mid-conversion removes OUT.mlb.tmp.<pid>
  CLI::App app{"Converts models to krafla's .mlb format.", "ml_convert"};
  app.require_subcommand(1);

  ml_convert_llama2c_params lo = ml_convert_llama2c_defaults();
  ml_convert_random_params ro = ml_convert_random_defaults();
  std::string l_ckpt, l_tok, l_out, r_tok, r_out, l_tmpl, r_tmpl, r_config, r_gguf;  // the options' const char* point into these
  bool r_tied = false;
  std::string l_wtype = "q8", l_scales = "f32", r_wtype = "q8", r_scales = "f32", rope = "interleaved";

  CLI::App* l2 = app.add_subcommand("llama2c", "a llama2.c float32 checkpoint (legacy or version 1) + tokenizer.bin");
  l2->add_option("checkpoint", l_ckpt, "the llama2.c checkpoint (.bin)")->required();
  l2->add_option("--tokenizer", l_tok,
                 "the tokenizer embedded in the output: llama2.c tokenizer.bin, or a Hugging Face folder "
                 "(tokenizer.json + tokenizer_config.json) or tokenizer.json")
      ->required();
  l2->add_option("--chat-template", l_tmpl, "a Jinja chat template file replacing the Hugging Face tokenizer's");
  l2->add_option("-o,--output", l_out, "the .mlb file to write")->required();
  l2->add_option("--wtype", l_wtype, "weight type: q8 or q4 (default q8)")->check(CLI::IsMember({"q8", "q4"}));
  l2->add_option("--scales", l_scales, "block scales: f32 or f16 (default f32)")->check(CLI::IsMember({"f32", "f16"}));

  CLI::App* rn = app.add_subcommand("random", "a random Llama model of any shape (tests, benchmarks)");
  rn->add_option("--dim", ro.dim, "model width, a multiple of 32");
  rn->add_option("--hidden", ro.hidden, "FFN width, a multiple of 32");
  rn->add_option("--layers", ro.layers, "number of layers");
  rn->add_option("--heads", ro.heads, "query heads");
  rn->add_option("--kv-heads", ro.kv_heads, "key/value heads (divides --heads)");
  rn->add_option("--vocab", ro.vocab, "vocabulary size (>= 3)");
  rn->add_option("--max-seq", ro.max_seq, "longest context");
  rn->add_option("--config", r_config,
                 "a Hugging Face config.json: its architecture and shape (the shape options given override it, "
                 "e.g. --layers 2 --vocab 512 for a short test model)");
  rn->add_option("--head-dim", ro.head_dim, "head width (default dim/heads); heads*head-dim a multiple of 32");
  rn->add_option("--seed", ro.seed, "generator seed, 0..2^64-1 (default 1); same seed, same bytes")
      ->check([](const std::string& v) {
        return v.empty() || v[0] == '-' ? std::string("must not be negative") : std::string();
      });
  rn->add_option("--wtype", r_wtype, "weight type: q8 or q4 (default q8)")->check(CLI::IsMember({"q8", "q4"}));
  rn->add_option("--scales", r_scales, "block scales: f32 or f16 (default f32)")->check(CLI::IsMember({"f32", "f16"}));
  rn->add_flag("--tied", r_tied, "reuse the embedding as the classifier (no output tensor)");
  rn->add_option("--rope-type", rope, "interleaved (llama2.c, GGUF) or half (Hugging Face); default interleaved")
      ->check(CLI::IsMember({"interleaved", "half"}));
  rn->add_option("--rope-theta", ro.rope_theta, "RoPE base (default 10000)");
  rn->add_option("--tokenizer", r_tok,
                 "a tokenizer to embed: llama2.c tokenizer.bin (its size must equal --vocab), or a Hugging Face "
                 "folder or tokenizer.json (at most --vocab tokens)");
  rn->add_option("--chat-template", r_tmpl, "a Jinja chat template file replacing the Hugging Face tokenizer's");
  rn->add_option("-o,--output", r_out, "the .mlb file to write")->required();
  rn->add_option("--gguf", r_gguf,
                 "also write the model as this GGUF file for llama.cpp (needs --scales f16; Llama: --rope-type "
                 "interleaved)");

  ml_convert_hf_params ho = ml_convert_hf_defaults();
  std::string h_dir, h_out, h_tmpl, h_wtype = "q8", h_scales = "f32";
  CLI::App* hf = app.add_subcommand("hf", "a Hugging Face model folder (Llama, Mistral, Qwen2, Qwen3, Gemma 3, Qwen3.5)");
  hf->add_option("dir", h_dir, "the folder: config.json, model.safetensors (or its index and shards), tokenizer.json")
      ->required();
  hf->add_option("-o,--output", h_out, "the .mlb file to write")->required();
  hf->add_option("--wtype", h_wtype, "weight type: q8 or q4 (default q8)")->check(CLI::IsMember({"q8", "q4"}));
  hf->add_option("--scales", h_scales, "block scales: f32 or f16 (default f32)")->check(CLI::IsMember({"f32", "f16"}));
  hf->add_option("--chat-template", h_tmpl, "a Jinja chat template file replacing the tokenizer's");
  ml_convert_gguf_params go = ml_convert_gguf_defaults();
  std::string g_path, g_out, g_wtype, g_tmpl;
  CLI::App* gg = app.add_subcommand("gguf", "a GGUF file (llama.cpp): llama, qwen2, qwen3, gemma3, qwen35, with its tokenizer");
  gg->add_option("file", g_path, "the .gguf file")->required();
  gg->add_option("-o,--output", g_out, "the .mlb file to write")->required();
  gg->add_option("--wtype", g_wtype,
                 "weight type for F32/F16/BF16 and requantized tensors: q8 or q4 (default: the file's, Q4 when its "
                 "quantized matrices are all Q4_0, else Q8)")
      ->check(CLI::IsMember({"q8", "q4"}));
  gg->add_option("--chat-template", g_tmpl, "a Jinja chat template file replacing tokenizer.chat_template");

  if (const int rc = ml::cli::parse(app, "ml_convert", argc, argv); rc >= 0) return rc;

  ml_error err;
  ml_status s = ML_OK;
  if (l2->parsed()) {
    lo.checkpoint = l_ckpt.c_str();
    lo.tokenizer = l_tok.c_str();
    lo.chat_template = l_tmpl.empty() ? nullptr : l_tmpl.c_str();
    lo.out = l_out.c_str();
    lo.wtype = wtype_of(l_wtype);
    lo.scales_f16 = l_scales == "f16";
    s = ml_convert_llama2c(&lo, &err);
  } else if (hf->parsed()) {
    ho.dir = h_dir.c_str();
    ho.out = h_out.c_str();
    ho.chat_template = h_tmpl.empty() ? nullptr : h_tmpl.c_str();
    ho.wtype = wtype_of(h_wtype);
    ho.scales_f16 = h_scales == "f16";
    ho.note = print_note;
    s = ml_convert_hf(&ho, &err);
  } else if (gg->parsed()) {
    go.path = g_path.c_str();
    go.out = g_out.c_str();
    go.wtype = g_wtype.empty() ? 0 : wtype_of(g_wtype);
    go.chat_template = g_tmpl.empty() ? nullptr : g_tmpl.c_str();
    go.warn = [](void*, const char* msg) { std::fprintf(stderr, "ml_convert: warning: %s\n", msg); };
    s = ml_convert_gguf(&go, &err);
  } else {
    ro.wtype = wtype_of(r_wtype);
    ro.scales_f16 = r_scales == "f16";
    ro.tied = r_tied ? 1 : 0;
    ro.rope_half = rope == "half";
    ro.tokenizer = r_tok.empty() ? nullptr : r_tok.c_str();
    ro.chat_template = r_tmpl.empty() ? nullptr : r_tmpl.c_str();
    ro.out = r_out.c_str();
    ro.config = r_config.empty() ? nullptr : r_config.c_str();
    if (!ro.config) {  // without a config every shape option is needed
      for (const char* opt : {"--dim", "--hidden", "--layers", "--heads", "--kv-heads", "--vocab", "--max-seq"})
        if (rn->count(opt) == 0) return ml::cli::usage_error("ml_convert", std::string("random: ") + opt + " is required (or give --config)");
    }
    ro.gguf = r_gguf.empty() ? nullptr : r_gguf.c_str();
    s = ml_convert_random(&ro, &err);
  }
  return s == ML_OK ? ml::cli::EXIT_OK : ml::cli::report("ml_convert", err);
}
