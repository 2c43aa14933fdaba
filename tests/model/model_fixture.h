// A tiny, valid Llama .mlb built in memory for tests that need a model without the converter:
// deterministic weights, written through ml_mlb_write to a temporary file and read back.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/format.h"

struct ml_fixture_shape {
  uint32_t dim = 64, hidden = 96, layers = 2, heads = 4, kv_heads = 2, vocab = 40, max_seq = 16;
  uint32_t wtype = ML_DT_Q8, scale_type = ML_SCALE_F32;
  bool tied = false;
};

// Writes the model to path (overwritten) and returns its bytes. Fails the current test on error.
std::vector<uint8_t> ml_fixture_model(const std::string& path, const ml_fixture_shape& shape = {});

// A unique temporary path for this test process.
std::string ml_fixture_tmp(const std::string& name);
