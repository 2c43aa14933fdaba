// ml_bench's tokenizer benchmark (encode_bench.cpp).
#pragma once
#include <string>
#include <vector>

// Times ml_tokenize (no special tokens) on each file's whole text; prints a Markdown row per file.
// Returns the exit code.
int bench_encode(const char* prog, const std::string& tokenizer, const std::vector<std::string>& texts, int runs);
