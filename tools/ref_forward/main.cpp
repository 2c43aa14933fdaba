// ref_forward: the independent double-precision reference forward pass (docs/tools.md).
//   ref_forward MODEL --tokens "1 2 3" [--kv f32|q8|f16|f64] [--dump-logits FILE] [-n N]
// MODEL is a .mlb file (magic KRAFLMLB; activations go through the Q8 rule) or a llama2.c
// float32 checkpoint (legacy or version 1; pure float64, no quantization).
// --dump-logits writes one row of vocab float32 (little-endian) per prompt position.
// -n/--generate N continues greedily (argmax, ties to the lowest id) and prints the prompt
// ids followed by the N generated ids on stdout, space separated.
// Exit codes: 0 ok, 1 a file could not be read or written, 2 bad options or a malformed model.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "forward.h"
#include "llama2c_reader.h"
#include "mlb_reader.h"

namespace {

std::vector<uint32_t> parse_tokens(const std::string& text) {
  std::vector<uint32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    size_t used = 0;
    unsigned long long v = 0;
    try {
      v = std::stoull(word, &used, 10);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || word[0] == '-' || v > 0xFFFFFFFFull)
      throw ref::RefError(2, "--tokens: '" + word + "' is not a token id");
    ids.push_back(uint32_t(v));
  }
  if (ids.empty()) throw ref::RefError(2, "--tokens: no token ids given");
  return ids;
}

uint32_t argmax(const std::vector<double>& v) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;  // strict: ties keep the lowest id
  return best;
}

int run(int argc, char** argv) {
  CLI::App app{"ref_forward: double-precision reference logits for .mlb and llama2.c models"};
  std::string model_path, tokens_text, kv_name = "auto", dump_path, ties_path;
  int64_t n_generate = -1;
  app.add_option("MODEL", model_path, "a .mlb model or a llama2.c float32 checkpoint")->required();
  app.add_option("--tokens", tokens_text, "prompt token ids, space separated")->required();
  app.add_option("--kv", kv_name,
                 "KV cache to emulate: f32 (the .mlb default), f16, q8, or f64 (the llama2.c default)")
      ->check(CLI::IsMember({"auto", "f32", "f16", "q8", "f64"}));
  app.add_option("--dump-logits", dump_path, "write vocab float32 logits per prompt position to FILE");
  app.add_option("-n,--generate", n_generate, "greedy continuation: print prompt + N generated ids");
  app.add_option("--near-ties", ties_path,
                 "write, per prompt position, how many activations sat within float32 rounding of a Q8 tie");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (app.count("--generate") && n_generate < 0) throw ref::RefError(2, "--generate: must be >= 0");
  if (dump_path.empty() && n_generate < 0) throw ref::RefError(2, "nothing to do: give --dump-logits FILE and/or -n N");

  const std::vector<uint32_t> prompt = parse_tokens(tokens_text);
  const std::vector<uint8_t> bytes = ref::read_file_bytes(model_path);
  const ref::RefModel model =
      ref::is_mlb(bytes) ? ref::load_mlb(model_path, bytes) : ref::load_llama2c(model_path, bytes);

  ref::KvMode kv = model.quantized ? ref::KvMode::f32 : ref::KvMode::f64;
  if (kv_name == "f32") kv = ref::KvMode::f32;
  if (kv_name == "f16") kv = ref::KvMode::f16;
  if (kv_name == "q8") kv = ref::KvMode::q8;
  if (kv_name == "f64") kv = ref::KvMode::f64;

  for (uint32_t id : prompt)
    if (id >= model.vocab)
      throw ref::RefError(2, "--tokens: id " + std::to_string(id) + " out of range (vocab " +
                                 std::to_string(model.vocab) + ")");
  const uint64_t gen = n_generate < 0 ? 0 : uint64_t(n_generate);
  // The last generated token is printed, not fed, so the positions run are prompt + gen - 1.
  const uint64_t positions = prompt.size() + (gen > 0 ? gen - 1 : 0);
  if (positions > model.max_seq)
    throw ref::RefError(2, "--tokens/-n: " + std::to_string(positions) + " positions exceed the model's max_seq " +
                               std::to_string(model.max_seq));

  std::FILE* dump = nullptr;
  if (!dump_path.empty()) {
    dump = std::fopen(dump_path.c_str(), "wb");
    if (!dump) throw ref::RefError(1, dump_path + ": cannot open for writing");
  }
  std::FILE* ties = nullptr;
  if (!ties_path.empty()) {
    ties = std::fopen(ties_path.c_str(), "w");
    if (!ties) throw ref::RefError(1, ties_path + ": cannot open for writing");
  }
  ref::Forward fwd(model, kv, uint32_t(positions));
  std::vector<uint32_t> out = prompt;
  std::vector<double> logits;
  std::vector<float> row(model.vocab);
  for (size_t i = 0; i < prompt.size(); ++i) {
    const uint64_t ties_before = ref::near_ties_seen();
    logits = fwd.step(prompt[i]);
    if (ties) std::fprintf(ties, "%llu\n", (unsigned long long)(ref::near_ties_seen() - ties_before));
    if (dump) {
      for (size_t j = 0; j < row.size(); ++j) row[j] = float(logits[j]);
      if (std::fwrite(row.data(), sizeof(float), row.size(), dump) != row.size()) {
        std::fclose(dump);
        throw ref::RefError(1, dump_path + ": write failed");
      }
    }
  }
  if (dump && std::fclose(dump) != 0) throw ref::RefError(1, dump_path + ": write failed");
  if (ties && std::fclose(ties) != 0) throw ref::RefError(1, ties_path + ": write failed");
  for (uint64_t g = 0; g < gen; ++g) {
    const uint32_t next = argmax(logits);
    out.push_back(next);
    if (g + 1 < gen) logits = fwd.step(next);
  }
  if (n_generate >= 0) {
    for (size_t i = 0; i < out.size(); ++i) std::printf(i ? " %u" : "%u", out[i]);
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const ref::RefError& e) {
    std::fprintf(stderr, "ref_forward: %s\n", e.what());
    return e.exit_code;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "ref_forward: out of memory\n");
    return 1;
  }
}
