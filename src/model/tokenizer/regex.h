// A small backtracking regex engine over code points for the patterns of tokenizer.json "Split"
// pre-tokenizers and ByteLevel's GPT-2 pattern, with Oniguruma/Perl semantics: the leftmost
// match; alternatives tried in order; greedy (and lazy) quantifiers with backtracking; the first
// successful path wins.
//
// Supported: literals and escapes (\r \n \t \f \v \e \a \0 \\ \. ... \x{..} \xHH \uXXXX), ., classes
// with ranges and negation, \s \S (White_Space) \d \D (Nd) \w \W (letters, marks, numbers, Pc),
// \p{..} / \P{..} with a general category or a one-letter group (L N P S M Z C), groups (...)
// (?:...) (?i:...) (?i) (simple case folding of the code points involved), alternation,
// quantifiers ? * + {n} {n,} {n,m} and their lazy forms, lookahead (?=...) (?!...), anchors ^ $
// (line anchors, as Oniguruma's Ruby syntax) and \A \z.
// Refused with ML_E_FORMAT naming the construct and its offset: lookbehind, backreferences,
// possessive quantifiers, named groups, atomic groups, other inline options, unknown escapes.
//
// Contract: compiling bounds the pattern's nesting and size; ml_regex_find bounds the work of one
// call with a step budget (ML_E_ARG naming the limit when spent). Nothing aborts, throws or exits.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"

struct ml_regex;
// ML_E_FORMAT naming the construct and its offset for anything unsupported ("regex offset 12: backreference \1 is not supported").
ml_status ml_regex_compile(const char* pattern, size_t len, ml_regex** out, ml_error* err);
void ml_regex_free(ml_regex* re);
// Leftmost match in cps[from, n): *found, *start, *end. A step budget bounds backtracking (ML_E_ARG past it, naming the limit).
// Empty matches are allowed to be returned (start == end); the caller decides.
ml_status ml_regex_find(const ml_regex* re, const uint32_t* cps, size_t n, size_t from, bool* found, size_t* start, size_t* end, ml_error* err);
