// The pre-tokenizer regex engine: a parser into an AST, a compiler into a small instruction list,
// and a backtracking matcher with an explicit stack (no recursion over the input; recursion only
// over lookahead nesting, which the pattern bounds). See regex.h for the syntax and contract.
//
// Oniguruma semantics kept (its default Ruby syntax, as Hugging Face's tokenizers use it):
// - \s is the White_Space property; \d is Nd; \w is L, M, N and Pc (Unicode-aware by default).
// - . matches anything but \n; ^ and $ are line anchors (after / before \n, or the text's ends).
// - An iteration of a * or + loop that matches the empty string ends the loop.
// - (?i) compares by simple case folding (CaseFolding.txt C and S): a character matches when any
//   code point of its case-fold orbit does. Multi-character folds (ß ~ ss) are not done.
// Speed: single-character atoms under a quantifier (\p{L}+, \s*, [^\r\n]{1,3}) run as one counted
// instruction with one backtrack entry, so runs of 10,000 letters or spaces stay linear; category
// lookups are memoized on the last run table interval hit.
//
// Files: regex_parse.cpp (the parser), this one (the compiler and the entry points),
// regex_match.cpp (the matcher); regex_impl.h holds what they share.
#include "model/tokenizer/regex.h"

#include <new>

#include "model/tokenizer/regex_impl.h"
#include "model/tokenizer/unicode.h"

namespace ml_rx {
namespace {

// --- Compiler -----------------------------------------------------------------------------------

struct compiler {
  const ml_vec<node>* nodes;
  ml_regex* re;
  ml_error* err;

  ml_status emit(const inst& in, uint32_t* at) {
    if (re->prog.size() >= kMaxProgram) return ml_fail(err, ML_E_FORMAT, "regex: pattern too large after expanding repeats (limit %zu instructions)", kMaxProgram);
    if (!re->prog.push(in)) return ml_fail(err, ML_E_NOMEM, "regex: out of memory compiling the pattern");
    if (at) *at = (uint32_t)re->prog.size() - 1;
    return ML_OK;
  }
  uint32_t here() const { return (uint32_t)re->prog.size(); }

  bool nullable(uint32_t id) const {
    const node& nd = (*nodes)[id];
    switch (nd.kind) {
      case N_ATOM: return false;
      case N_CAT:
        for (uint32_t k = nd.kid; k != kInf; k = (*nodes)[k].next)
          if (!nullable(k)) return false;
        return true;
      case N_ALT:
        for (uint32_t k = nd.kid; k != kInf; k = (*nodes)[k].next)
          if (nullable(k)) return true;
        return false;
      case N_REPEAT: return nd.min == 0 || nullable(nd.kid);
      default: return true;
    }
  }

  // The atoms one of which must match the first code point of any match of node id (at most 4);
  // false when unknown (nullable, anchors, lookahead, too many).
  bool first_set(uint32_t id, atom* g, uint32_t* ng) const {
    const node& nd = (*nodes)[id];
    switch (nd.kind) {
      case N_ATOM: {
        for (uint32_t q = 0; q < *ng; ++q)  // the same atom twice ('s|'t): once
          if (g[q].kind == nd.at.kind && g[q].ncp == nd.at.ncp && g[q].icase == nd.at.icase && g[q].cls == nd.at.cls &&
              g[q].cps[0] == nd.at.cps[0] && g[q].cps[1] == nd.at.cps[1] && g[q].cps[2] == nd.at.cps[2] &&
              g[q].cps[3] == nd.at.cps[3])
            return true;
        if (*ng >= 4) return false;
        g[(*ng)++] = nd.at;
        return true;
      }
      case N_REPEAT: return nd.min >= 1 && first_set(nd.kid, g, ng);
      case N_ALT:
        for (uint32_t k = nd.kid; k != kInf; k = (*nodes)[k].next)
          if (!first_set(k, g, ng)) return false;
        return true;
      case N_CAT:
        for (uint32_t k = nd.kid; k != kInf; k = (*nodes)[k].next) {
          const node& c = (*nodes)[k];
          if (c.kind == N_REPEAT && c.min == 0) {  // optional: its first characters, then what follows
            if (!first_set(c.kid, g, ng)) return false;
            continue;
          }
          return first_set(k, g, ng);
        }
        return false;
      default: return false;
    }
  }

  ml_status gen(uint32_t id) {
    const node& nd = (*nodes)[id];
    inst in{};
    switch (nd.kind) {
      case N_EMPTY: return ML_OK;
      case N_ATOM: in.op = I_ATOM, in.at = nd.at; return emit(in, nullptr);
      case N_BOL: in.op = I_BOL; return emit(in, nullptr);
      case N_EOL: in.op = I_EOL; return emit(in, nullptr);
      case N_BOS: in.op = I_BOS; return emit(in, nullptr);
      case N_EOS: in.op = I_EOS; return emit(in, nullptr);
      case N_EOSNL: in.op = I_EOSNL; return emit(in, nullptr);
      case N_CAT:
        for (uint32_t k = nd.kid; k != kInf; k = (*nodes)[k].next) ML_TRY(gen(k));
        return ML_OK;
      case N_ALT: {
        // SPLIT a, next; a: X; JMP end; next: SPLIT b, next2 ...; last: Z; end:
        ml_vec<uint32_t> jumps;
        for (uint32_t k = nd.kid; k != kInf; k = (*nodes)[k].next) {
          uint32_t split = kInf;
          if ((*nodes)[k].next != kInf) {
            in = inst{};
            in.op = I_SPLIT;
            atom g[4];
            uint32_t ng = 0;
            if (first_set(k, g, &ng)) {
              in.min = (uint32_t)re->guards.size();
              in.max = ng;
              for (uint32_t q = 0; q < ng; ++q)
                if (!re->guards.push(g[q])) return ml_fail(err, ML_E_NOMEM, "regex: out of memory compiling the pattern");
            }
            ML_TRY(emit(in, &split));
            re->prog[split].x = here();
          }
          ML_TRY(gen(k));
          if (split != kInf) {
            uint32_t j = 0;
            in = inst{};
            in.op = I_JMP;
            ML_TRY(emit(in, &j));
            if (!jumps.push(j)) return ml_fail(err, ML_E_NOMEM, "regex: out of memory compiling the pattern");
            re->prog[split].y = here();
          }
        }
        for (uint32_t j : jumps) re->prog[j].x = here();
        return ML_OK;
      }
      case N_LOOK: {
        uint32_t at = 0;
        in.op = I_LOOK;
        in.flag = nd.flag;
        ML_TRY(emit(in, &at));
        ML_TRY(gen(nd.kid));
        inst m{};
        m.op = I_MATCH;
        ML_TRY(emit(m, nullptr));
        re->prog[at].y = here();
        return ML_OK;
      }
      case N_REPEAT: {
        const node& kid = (*nodes)[nd.kid];
        if (kid.kind == N_ATOM) {
          in.op = I_REPEAT;
          in.flag = nd.flag;
          in.at = kid.at;
          in.min = nd.min;
          in.max = nd.max;
          return emit(in, nullptr);
        }
        for (uint32_t k = 0; k < nd.min; ++k) ML_TRY(gen(nd.kid));
        if (nd.max == kInf) {
          // L: SPLIT body, exit; body: [MARK r] X [PROGRESS r] JMP L; exit:
          bool guard = nullable(nd.kid);
          uint32_t reg = re->nregs;
          if (guard) ++re->nregs;
          uint32_t loop = 0;
          in.op = I_SPLIT;
          ML_TRY(emit(in, &loop));
          uint32_t body = here();
          if (guard) {
            inst m{};
            m.op = I_MARK;
            m.x = reg;
            ML_TRY(emit(m, nullptr));
          }
          ML_TRY(gen(nd.kid));
          uint32_t prog_at = kInf;
          if (guard) {
            inst m{};
            m.op = I_PROGRESS;
            m.x = reg;
            ML_TRY(emit(m, &prog_at));
          }
          inst j{};
          j.op = I_JMP;
          j.x = loop;
          ML_TRY(emit(j, nullptr));
          uint32_t exit = here();
          re->prog[loop].x = nd.flag ? body : exit;
          re->prog[loop].y = nd.flag ? exit : body;
          if (guard) re->prog[prog_at].y = exit;
          return ML_OK;
        }
        // Optional copies: SPLIT body, end; body: X; SPLIT body2, end; ... end:
        ml_vec<uint32_t> splits;
        for (uint32_t k = nd.min; k < nd.max; ++k) {
          uint32_t s = 0;
          in = inst{};
          in.op = I_SPLIT;
          ML_TRY(emit(in, &s));
          if (!splits.push(s)) return ml_fail(err, ML_E_NOMEM, "regex: out of memory compiling the pattern");
          uint32_t body = here();
          re->prog[s].x = body;  // patched below for laziness
          ML_TRY(gen(nd.kid));
        }
        uint32_t end = here();
        for (uint32_t s : splits) {
          uint32_t body = s + 1;
          re->prog[s].x = nd.flag ? body : end;
          re->prog[s].y = nd.flag ? end : body;
        }
        return ML_OK;
      }
      default: return ML_OK;
    }
  }
};

}  // namespace
}  // namespace ml_rx

using namespace ml_rx;

ml_status ml_regex_compile(const char* pattern, size_t len, ml_regex** out, ml_error* err) {
  *out = nullptr;
  if (len > kMaxPattern) return ml_fail(err, ML_E_FORMAT, "regex: pattern of %zu bytes is over the limit of %zu", len, kMaxPattern);
  size_t bad = 0;
  if (!ml_utf8_check(pattern, len, &bad)) return ml_fail(err, ML_E_FORMAT, "regex offset %zu: invalid UTF-8 in the pattern", bad);
  ml_regex* re = new (std::nothrow) ml_regex;
  if (!re) return ml_fail(err, ML_E_NOMEM, "regex: out of memory compiling the pattern");
  ml_vec<node> nodes;
  uint32_t root;
  ml_status s = parse(pattern, len, re, &nodes, &root, err);
  if (s == ML_OK) {
    compiler cg{&nodes, re, err};
    s = cg.gen(root);
    inst m{};
    m.op = I_MATCH;
    if (s == ML_OK) s = cg.emit(m, nullptr);
  }
  if (s != ML_OK) {
    delete re;
    return s;
  }
  fill_ascii(re);  // the ASCII bitmaps of the class atoms
  *out = re;
  return ML_OK;
}

void ml_regex_free(ml_regex* re) { delete re; }
