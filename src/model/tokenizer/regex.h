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
// Oniguruma's default syntax details kept: x{n}? is (?:x{n})? (x{n,m}? is lazy); {,n} is {0,n};
// a '{' that does not start a quantifier is a literal; an empty iteration ends a * / + loop.
// Refused with ML_E_FORMAT naming the construct and its offset: lookbehind, backreferences,
// possessive and nested quantifiers, named, atomic and comment groups, inline options other than
// i, \b \B \G \K \R \X \h \k \g, POSIX brackets, nested classes and && in classes, \p{..} other
// than general categories (LC, L&, Any included), unknown escapes. Case-insensitive matching is by
// simple case folding only (no multi-character folds such as ß ~ ss).
//
// Contract: compiling bounds the pattern (16 KiB, 64 nested groups, repeat counts <= 1000,
// 100,000 instructions after expanding counted repeats of groups); ml_regex_find bounds the work
// of one call with a step budget and a backtrack stack limit (ML_E_ARG naming the limit when
// reached), both a base plus a multiple of the code points searched, so the GPT-2 / Llama 3 /
// Qwen2 patterns never reach them. The compiled regex is immutable: concurrent finds are safe.
// Nothing aborts, throws or exits.
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
