// The generated Unicode tables (unicode_data.cpp, written by tools/gen_unicode.py, whose docstring
// describes their layout). Internal to model/tokenizer: use unicode.h.
#pragma once
#include <cstdint>

extern const char ml_unicode_version[];

// Run tables: the value of cp is vals[k] for the last k with starts[k] <= cp (starts[0] == 0).
// ucat: General_Category (ml_ucat) | White_Space << 5.
extern const uint32_t ml_ucat_runs, ml_ccc_runs, ml_unflags_runs;
extern const uint32_t ml_ucat_starts[], ml_ccc_starts[], ml_unflags_starts[];
extern const uint8_t ml_ucat_vals[], ml_ccc_vals[], ml_unflags_vals[];
extern const uint8_t ml_ucat_latin1[256];
extern const uint8_t ml_unflags_low[0x800];  // ml_unflags_vals of U+0000..U+07FF, directly

// Normalization flags (ml_unflags_vals).
enum : uint8_t {
  ML_UN_CANON = 1,       // has a canonical decomposition (Hangul syllables included)
  ML_UN_COMPAT = 2,      // has a compatibility decomposition differing from the canonical one
  ML_UN_NONSTARTER = 4,  // ccc != 0
  ML_UN_SECOND = 8,      // may combine with a preceding character
  ML_UN_FIRST = 16,      // may combine with a following character
};

// Pair tables, sorted by from[].
extern const uint32_t ml_lower_n, ml_upper_n, ml_fold_orbit_n;
extern const uint32_t ml_lower_from[], ml_lower_to[], ml_upper_from[], ml_upper_to[];
extern const uint32_t ml_fold_orbit_from[], ml_fold_orbit_to[];

// Full decompositions: ref = offset << 8 | length into ml_decomp_pool.
extern const uint32_t ml_decomp_canon_n, ml_decomp_compat_n, ml_decomp_pool_n;
extern const uint32_t ml_decomp_canon_cp[], ml_decomp_canon_ref[], ml_decomp_compat_cp[], ml_decomp_compat_ref[];
extern const uint32_t ml_decomp_pool[];

// Primary composites: key = first << 21 | second.
extern const uint32_t ml_comp_n;
extern const uint64_t ml_comp_key[];
extern const uint32_t ml_comp_to[];
