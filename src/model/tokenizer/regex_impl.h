// Internals of the pre-tokenizer regex engine (regex.h), shared by its files: regex_parse.cpp
// (the pattern into an AST), regex.cpp (the AST compiled into an instruction list; the entry
// points) and regex_match.cpp (the backtracking matcher). Not part of the engine's interface.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "core/vec.h"
#include "model/tokenizer/regex.h"

namespace ml_rx {

constexpr size_t kMaxPattern = 16384;       // bytes of pattern
constexpr int kMaxDepth = 64;               // group nesting
constexpr uint32_t kMaxRepeat = 1000;       // n and m of {n,m}
constexpr size_t kMaxProgram = 100000;      // instructions after expanding counted repeats
constexpr uint64_t kStepBase = 1u << 22;    // step budget of one find: base + per code point
constexpr uint64_t kStepsPerCp = 1024;
constexpr size_t kStackBase = 1u << 20;     // backtrack entries of one find: base + per code point
constexpr size_t kStackPerCp = 4;
constexpr uint32_t kInf = 0xFFFFFFFFu;

// Class items: a range, a set of general categories, White_Space; each possibly complemented.
enum : uint8_t { CI_RANGE, CI_CATS, CI_WS };
struct citem {
  uint8_t kind;
  bool neg;
  uint32_t lo, hi;  // CI_RANGE: [lo, hi]; CI_CATS: lo = category bit mask
};
struct cclass {
  uint32_t first, count;  // items
  bool neg;
};

// Atoms: what one code point is tested against.
enum : uint8_t { A_CHAR, A_CLASS, A_ANY };
struct atom {
  uint8_t kind;
  uint8_t ncp;      // A_CHAR: 1..4 code points (the case-fold orbit under (?i))
  bool icase;       // A_CLASS under (?i)
  uint32_t cps[4];  // A_CHAR
  uint32_t cls;     // A_CLASS
  bool fast;        // A_CLASS: ascii[] holds the answer for code points below 128
  uint64_t ascii[2];
};

// AST.
enum : uint8_t { N_EMPTY, N_ATOM, N_CAT, N_ALT, N_REPEAT, N_LOOK, N_BOL, N_EOL, N_BOS, N_EOS, N_EOSNL };
struct node {
  uint8_t kind;
  bool flag;           // N_REPEAT: greedy; N_LOOK: negative
  atom at;             // N_ATOM
  uint32_t min, max;   // N_REPEAT
  uint32_t kid;        // N_REPEAT, N_LOOK: child; N_CAT, N_ALT: first child
  uint32_t next;       // next sibling in a N_CAT / N_ALT list (kInf: none)
};

// Instructions.
enum : uint8_t { I_ATOM, I_REPEAT, I_SPLIT, I_JMP, I_MARK, I_PROGRESS, I_LOOK, I_MATCH, I_BOL, I_EOL, I_BOS, I_EOS, I_EOSNL };
struct inst {
  uint8_t op;
  bool flag;       // I_SPLIT: unused; I_REPEAT: greedy; I_LOOK: negative
  atom at;         // I_ATOM, I_REPEAT
  uint32_t x, y;   // I_SPLIT: first, second; I_JMP: x; I_MARK/I_PROGRESS: register x, exit y; I_LOOK: end y
  uint32_t min, max;
};

// Backtrack entries.
enum : uint8_t { B_BRANCH, B_GREEDY, B_LAZY, B_REG };
struct bt {
  uint8_t kind;
  uint32_t pc;
  size_t pos;    // B_BRANCH: position; B_GREEDY/B_LAZY: start of the run; B_REG: old value
  uint32_t count;  // B_GREEDY/B_LAZY: the count now taken; B_REG: register
};

// The next code point of cp's simple case-fold orbit (cp itself when it has none).
uint32_t fold_next(uint32_t cp);

}  // namespace ml_rx

struct ml_regex {
  ml_vec<ml_rx::inst> prog;
  ml_vec<ml_rx::cclass> classes;
  ml_vec<ml_rx::citem> items;
  ml_vec<ml_rx::atom> guards;  // I_SPLIT guards: the branch is tried only when one of these matches
  uint32_t nregs = 0;
};

namespace ml_rx {

// Parses pattern[0, len) (valid UTF-8, at most kMaxPattern bytes) into nodes, its classes into
// re; *root is the whole pattern's node. ML_E_FORMAT "regex offset N: ..." on a syntax error.
ml_status parse(const char* pattern, size_t len, ml_regex* re, ml_vec<node>* nodes, uint32_t* root, ml_error* err);

// Fills every class atom's ASCII bitmap (atom::ascii, fast) from the general matcher, folds included.
void fill_ascii(ml_regex* re);

}  // namespace ml_rx
