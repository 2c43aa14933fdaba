// Stop strings over streamed UTF-8 text: text passes through as it comes, except a tail that could
// still become a stop string, which is held until it can be told apart; on a match, only what
// precedes the stop string is released and the filter reports it. Byte-exact matching; a held
// tail always starts at a character boundary (a stop string starts with one), so released text
// stays whole characters. Memory is given by the caller (no allocation here).
#pragma once
#include <cstddef>

struct ml_stop_filter {
  const char* const* stops = nullptr;  // the non-empty stop strings
  const size_t* lens = nullptr;
  size_t n = 0;
  char* held = nullptr;  // [cap]
  size_t n_held = 0, cap = 0;
};

// Adds text[0, len) and writes what can be released to out (room for n_held + len bytes);
// *released = its length. Returns true when a stop string matched (out holds the text before it).
bool ml_stop_push(ml_stop_filter* f, const char* text, size_t len, char* out, size_t* released);

// Releases everything still held into out (room for n_held bytes); returns its length.
size_t ml_stop_finish(ml_stop_filter* f, char* out);
