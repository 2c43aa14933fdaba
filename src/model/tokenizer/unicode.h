// The Unicode layer under the tokenizer.json tokenizers: strict UTF-8, the General_Category and
// White_Space properties, normalization (NFC, NFD, NFKC, NFKD, UAX #15) and the simple lowercase
// mapping, all from Unicode 15.0 tables generated into unicode_data.cpp by tools/gen_unicode.py.
//
// Contract:
// - ml_utf8_check is strict: no overlong forms, no surrogates (U+D800..U+DFFF), nothing above
//   U+10FFFF, no truncated sequence; on failure *bad_offset (may be null) is the offset of the
//   first byte of the offending sequence. ml_utf8_next requires input that passed the check.
// - The normalizing functions take valid UTF-8 (ML_E_FORMAT naming the offset otherwise), clear
//   out and align first (on failure they hold an unspecified prefix), and fill align (may be
//   null) with one entry per output byte: the offset in s of the first byte of an input
//   character, as Hugging Face's tokenizers align normalized text (NormalizedString replaying
//   unicode-normalization-alignments' change tags): output characters take the input characters
//   in order, a composite consumes the characters it absorbed, a code point a decomposition added
//   points at the character before, and a mark that canonical ordering moved points at the input
//   position it now occupies. Texts are limited to 4 GiB (offsets are 32-bit).
// - Pure ASCII input takes a fast path (NFC/NFD/NFKC/NFKD of ASCII are the identity).
// - Nothing aborts, throws or exits; allocation failure is ML_E_NOMEM.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "core/vec.h"

// UTF-8
bool ml_utf8_check(const char* s, size_t n, size_t* bad_offset);  // strict (no overlongs, surrogates, > U+10FFFF)
uint32_t ml_utf8_next(const char* s, size_t n, size_t* i);       // decodes at *i (valid input), advances *i
int ml_utf8_put(uint32_t cp, char out[4]);                        // bytes written

// General category
enum ml_ucat : uint8_t { ML_UCAT_Cn = 0, ML_UCAT_Lu, ML_UCAT_Ll, ML_UCAT_Lt, ML_UCAT_Lm, ML_UCAT_Lo, ML_UCAT_Mn, ML_UCAT_Mc, ML_UCAT_Me,
  ML_UCAT_Nd, ML_UCAT_Nl, ML_UCAT_No, ML_UCAT_Pc, ML_UCAT_Pd, ML_UCAT_Ps, ML_UCAT_Pe, ML_UCAT_Pi, ML_UCAT_Pf, ML_UCAT_Po,
  ML_UCAT_Sm, ML_UCAT_Sc, ML_UCAT_Sk, ML_UCAT_So, ML_UCAT_Zs, ML_UCAT_Zl, ML_UCAT_Zp, ML_UCAT_Cc, ML_UCAT_Cf, ML_UCAT_Cs, ML_UCAT_Co };
ml_ucat ml_unicode_category(uint32_t cp);
bool ml_unicode_is_white_space(uint32_t cp);   // the White_Space property (regex \s)

// Normalization (UAX #15), with alignment: for each output byte, align[i] = the offset in s of the
// first byte of its input character as Hugging Face aligns it (above; align may be null).
enum ml_unorm : uint8_t { ML_NFC, ML_NFD, ML_NFKC, ML_NFKD };
ml_status ml_unicode_normalize(ml_unorm form, const char* s, size_t n, ml_vec<char>* out, ml_vec<uint32_t>* align, ml_error* err);
ml_status ml_unicode_lowercase(const char* s, size_t n, ml_vec<char>* out, ml_vec<uint32_t>* align, ml_error* err); // simple lowercase mapping (UnicodeData field 13)

// Additions beyond the agreed interface.
// The simple lowercase / uppercase mappings (UnicodeData fields 13 / 12; cp itself when none).
uint32_t ml_unicode_simple_lower(uint32_t cp);
uint32_t ml_unicode_simple_upper(uint32_t cp);
// The canonical combining class (UnicodeData field 3).
uint8_t ml_unicode_ccc(uint32_t cp);
