// Reader of krafla's .mlb model files for ref_forward, written from docs/format.md alone
// (it shares no code with src/model/format.cpp, so each checks the other).
// Contract: load_mlb validates the header (versions 1 and 2), the directory and every tensor of
// the model the header describes (any arch 0..4: the optional tensors its flags call for, the
// gated-delta tensors of linear layers, no others) and returns the weights dequantized to
// double (Q8: q*d; Q4: (nibble-8)*d, GGUF nibble order; f32 or f16 scales). It throws RefError(2, msg naming the field) on a malformed
// or unsupported file, RefError(1, ...) when the file cannot be read.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ref_model.h"

namespace ref {

inline constexpr char kMlbMagic[8] = {'K', 'R', 'A', 'F', 'L', 'M', 'L', 'B'};

bool is_mlb(const std::vector<uint8_t>& bytes);
RefModel load_mlb(const std::string& path, const std::vector<uint8_t>& bytes);

// IEEE binary16 bits -> double (exact).
double half_bits_to_double(uint16_t h);

}  // namespace ref
