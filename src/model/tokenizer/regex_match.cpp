// The pre-tokenizer regex engine's matcher (regex_impl.h): a backtracking matcher over the
// compiled instruction list with an explicit stack (no recursion over the input; recursion only
// over lookahead nesting, which the pattern bounds), and ml_regex_find over it.
#include "model/tokenizer/regex_impl.h"

#include "model/tokenizer/unicode_data.h"

namespace ml_rx {
namespace {

// --- Matcher ------------------------------------------------------------------------------------

struct matcher {
  const ml_regex* re = nullptr;
  const uint32_t* cps = nullptr;
  size_t n = 0;
  uint64_t steps = 0, budget = 0;
  ml_vec<bt> stack;
  ml_vec<size_t> regs;
  ml_error* err = nullptr;
  bool out_of_steps = false, oom = false, stack_full = false;
  size_t stack_limit = 0;
  // Memo of the last category run table interval.
  uint32_t lo = 1, hi = 0;
  uint8_t val = 0;

  uint8_t props(uint32_t cp) {
    if (cp < 256) return ml_ucat_latin1[cp];
    if (cp >= lo && cp <= hi) return val;
    if (cp > 0x10FFFF) return 0;
    uint32_t a = 0, b = ml_ucat_runs;
    while (b - a > 1) {
      uint32_t mid = (a + b) / 2;
      if (ml_ucat_starts[mid] <= cp) a = mid;
      else b = mid;
    }
    lo = ml_ucat_starts[a];
    hi = a + 1 < ml_ucat_runs ? ml_ucat_starts[a + 1] - 1 : 0x10FFFF;
    val = ml_ucat_vals[a];
    return val;
  }

  bool class_has(const cclass& cl, uint32_t c) {
    bool in = false;
    for (uint32_t k = 0; k < cl.count && !in; ++k) {
      const citem& it = re->items[cl.first + k];
      bool m;
      if (it.kind == CI_RANGE) m = c >= it.lo && c <= it.hi;
      else if (it.kind == CI_CATS) m = (it.lo >> (props(c) & 31)) & 1;
      else m = props(c) & 32;
      in = m != it.neg;
    }
    return in != cl.neg;
  }

  __attribute__((always_inline)) bool atom_match(const atom& a, uint32_t c) {
    switch (a.kind) {
      case A_CHAR:
        for (int k = 0; k < a.ncp; ++k)
          if (a.cps[k] == c) return true;
        return false;
      case A_ANY: return c != '\n';
      default: {
        if (c < 128 && a.fast) return (a.ascii[c >> 6] >> (c & 63)) & 1;
        const cclass& cl = re->classes[a.cls];
        if (class_has(cl, c)) return true;
        if (a.icase)
          for (uint32_t f = fold_next(c); f != c; f = fold_next(f))
            if (class_has(cl, f)) return true;
        return false;
      }
    }
  }

  bool push(const bt& b) {
    if (stack.size() >= stack_limit) {
      stack_full = true;
      return false;
    }
    if (!stack.push(b)) {
      oom = true;
      return false;
    }
    return true;
  }

  // Runs from pc at pos until I_MATCH; *end = the match's end. False: no match (or a failure:
  // out_of_steps / oom set).
  bool run(uint32_t pc, size_t pos, size_t* end) {
    size_t base = stack.size();
    const inst* prog = re->prog.data();
    for (;;) {
      if (++steps > budget) {
        out_of_steps = true;
        return false;
      }
      const inst& in = prog[pc];
      bool ok = true;
      switch (in.op) {
        case I_ATOM:
          if (pos < n && atom_match(in.at, cps[pos])) ++pos, ++pc;
          else ok = false;
          break;
        case I_REPEAT: {
          if (in.flag) {
            size_t k = 0;
            while (k < in.max && pos + k < n && atom_match(in.at, cps[pos + k])) ++k;
            steps += k / 8;
            if (k < in.min) {
              ok = false;
              break;
            }
            if (k > in.min && !push({B_GREEDY, pc, pos, (uint32_t)k})) return false;
            pos += k, ++pc;
          } else {
            size_t k = 0;
            while (k < in.min && pos + k < n && atom_match(in.at, cps[pos + k])) ++k;
            if (k < in.min) {
              ok = false;
              break;
            }
            if (k < in.max && !push({B_LAZY, pc, pos, (uint32_t)k})) return false;
            pos += k, ++pc;
          }
          break;
        }
        case I_SPLIT:
          if (in.max) {  // a guarded alternative: skipped unless its first character can match
            bool may = false;
            if (pos < n)
              for (uint32_t g = 0; g < in.max && !may; ++g) may = atom_match(re->guards[in.min + g], cps[pos]);
            if (!may) {
              pc = in.y;
              break;
            }
          }
          if (!push({B_BRANCH, in.y, pos, 0})) return false;
          pc = in.x;
          break;
        case I_JMP: pc = in.x; break;
        case I_MARK:
          if (!push({B_REG, 0, regs[in.x], in.x})) return false;
          regs[in.x] = pos;
          ++pc;
          break;
        case I_PROGRESS: pc = regs[in.x] == pos ? in.y : pc + 1; break;
        case I_LOOK: {
          size_t e;
          size_t mark = stack.size();
          bool m = run(pc + 1, pos, &e);  // depth bounded by the pattern's lookahead nesting
          if (out_of_steps || oom || stack_full) return false;
          // Lookahead is atomic: its backtrack entries are dropped (restoring registers).
          while (stack.size() > mark) {
            bt b = stack.back();
            stack.pop();
            if (b.kind == B_REG) regs[b.count] = b.pos;
          }
          if (m != in.flag) pc = in.y;
          else ok = false;
          break;
        }
        case I_MATCH: *end = pos; return true;
        case I_BOL: ok = pos == 0 || cps[pos - 1] == '\n', ++pc; break;
        case I_EOL: ok = pos == n || cps[pos] == '\n', ++pc; break;
        case I_BOS: ok = pos == 0, ++pc; break;
        case I_EOS: ok = pos == n, ++pc; break;
        case I_EOSNL: ok = pos == n || (pos + 1 == n && cps[pos] == '\n'), ++pc; break;
        default: ok = false;
      }
      if (ok) continue;
      // Backtrack.
      for (;;) {
        if (stack.size() == base) return false;
        bt b = stack.back();
        stack.pop();
        if (b.kind == B_BRANCH) {
          pc = b.pc, pos = b.pos;
          break;
        }
        if (b.kind == B_REG) {
          regs[b.count] = b.pos;
          continue;
        }
        const inst& r = prog[b.pc];
        if (b.kind == B_GREEDY) {
          uint32_t k = b.count - 1;
          if (k > r.min && !push({B_GREEDY, b.pc, b.pos, k})) return false;
          pos = b.pos + k, pc = b.pc + 1;
          break;
        }
        // B_LAZY: one more.
        size_t at = b.pos + b.count;
        if (at < n && atom_match(r.at, cps[at])) {
          uint32_t k = b.count + 1;
          if (k < r.max && !push({B_LAZY, b.pc, b.pos, k})) return false;
          pos = at + 1, pc = b.pc + 1;
          break;
        }
      }
    }
  }
};

}  // namespace

void fill_ascii(ml_regex* re) {
  matcher mm;
  mm.re = re;
  auto fill = [&](atom& a) {
    if (a.kind != A_CLASS) return;
    a.fast = false;
    a.ascii[0] = a.ascii[1] = 0;
    for (uint32_t c = 0; c < 128; ++c)
      if (mm.atom_match(a, c)) a.ascii[c >> 6] |= 1ull << (c & 63);
    a.fast = true;
  };
  for (inst& in : re->prog) fill(in.at);
  for (atom& a : re->guards) fill(a);
}

}  // namespace ml_rx

using namespace ml_rx;

ml_status ml_regex_find(const ml_regex* re, const uint32_t* cps, size_t n, size_t from, bool* found, size_t* start,
                        size_t* end, ml_error* err) {
  *found = false;
  *start = *end = 0;
  if (from > n) return ml_fail(err, ML_E_ARG, "regex: search start %zu is past the end %zu", from, n);
  if (n > 0xFFFFFFFFu) return ml_fail(err, ML_E_ARG, "regex: text of %zu code points is over the limit of 2^32 - 1", n);
  matcher m;
  m.re = re, m.cps = cps, m.n = n;
  m.err = err;
  m.budget = kStepBase + kStepsPerCp * (uint64_t)(n - from);
  m.stack_limit = kStackBase + kStackPerCp * (n - from);
  if (!m.regs.resize(re->nregs)) return ml_fail(err, ML_E_NOMEM, "regex: out of memory matching");
  for (size_t s = from; s <= n; ++s) {
    size_t e;
    m.stack.clear();
    if (m.run(0, s, &e)) {
      *found = true;
      *start = s;
      *end = e;
      return ML_OK;
    }
    if (m.oom) return ml_fail(err, ML_E_NOMEM, "regex: out of memory matching (backtrack stack)");
    if (m.stack_full)
      return ml_fail(err, ML_E_ARG, "regex: backtrack stack limit reached (%zu entries: %zu + %zu per code point searched)",
                     m.stack_limit, kStackBase, kStackPerCp);
    if (m.out_of_steps)
      return ml_fail(err, ML_E_ARG, "regex: match step budget exhausted (limit %llu steps: %llu + %llu per code point searched)",
                     (unsigned long long)m.budget, (unsigned long long)kStepBase, (unsigned long long)kStepsPerCp);
  }
  return ML_OK;
}
