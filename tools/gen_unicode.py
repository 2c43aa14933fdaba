#!/usr/bin/env python3
"""Generates src/model/tokenizer/unicode_data.cpp: the Unicode tables under model/tokenizer/unicode.cpp
and regex.cpp, from the Unicode Character Database files of Debian's `unicode-data` package.

  python3 tools/gen_unicode.py [UCD_DIR] [OUT]   (defaults: /usr/share/unicode, the committed path)

Inputs: UnicodeData.txt (categories, combining classes, decompositions, simple case mappings),
CompositionExclusions.txt (script-specific and post-composition-version exclusions), PropList.txt
(White_Space), CaseFolding.txt (simple case folding, status C and S, for the regex's (?i)).
The output is deterministic: regenerating from the same files gives the same bytes
(tests/model/test_unicode.cpp checks that when python3 and the files are present).

Tables (all sorted, binary-searched):
- run tables: starts[] / vals[]: the value of cp is vals[k] for the last k with starts[k] <= cp.
  category (General_Category | White_Space << 5), ccc, normalization flags (ML_UN_* below);
  direct tables for the first code points: ml_ucat_latin1 (256), ml_unflags_low (0x800).
- pair tables: simple lowercase, simple uppercase, case-fold orbit (cp -> the next code point
  with the same simple case folding, cyclic).
- decompositions: the full (recursive) canonical and full compatibility decompositions, each
  cp -> (offset, length) into a pool; Hangul syllables are algorithmic and not listed.
- compositions: the primary composites (first << 21 | second) -> composite, exclusions removed.
"""
import os
import sys

CATS = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
        "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"]
MAXCP = 0x110000
SBASE, LBASE, VBASE, TBASE = 0xAC00, 0x1100, 0x1161, 0x11A7
LCOUNT, VCOUNT, TCOUNT = 19, 21, 28
SCOUNT = LCOUNT * VCOUNT * TCOUNT

# Normalization flags (must match unicode.cpp).
UN_CANON = 1      # has a canonical decomposition (Hangul syllables included)
UN_COMPAT = 2     # has a compatibility decomposition differing from the canonical one
UN_NONSTARTER = 4  # ccc != 0
UN_SECOND = 8     # can combine with a preceding character in composition (Hangul V, T included)
UN_FIRST = 16     # can combine with a following character (Hangul L and syllables included)


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                yield line


def parse_range(s):
    if ".." in s:
        a, b = s.split("..")
        return int(a, 16), int(b, 16)
    return int(s, 16), int(s, 16)


def main():
    ucd = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode"
    here = os.path.dirname(os.path.abspath(__file__))
    out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "src", "model", "tokenizer",
                                                                   "unicode_data.cpp")
    version = "unknown"
    with open(os.path.join(ucd, "ReadMe.txt"), encoding="utf-8") as f:
        for line in f:
            if "/versions/Unicode" in line:
                version = line.split("/versions/Unicode")[1].split("/")[0]
                break

    cat = bytearray(MAXCP)  # 0 = Cn
    ccc = bytearray(MAXCP)
    decomp = {}  # cp -> (is_compat, [cps])
    lower, upper = {}, {}
    first_range = None
    for line in read_lines(os.path.join(ucd, "UnicodeData.txt")):
        f = line.split(";")
        cp = int(f[0], 16)
        c = CATS.index(f[2])
        if f[1].endswith(", First>"):
            first_range = cp
            continue
        if f[1].endswith(", Last>"):
            for x in range(first_range, cp + 1):
                cat[x] = c
                ccc[x] = int(f[3])
            continue
        cat[cp] = c
        ccc[cp] = int(f[3])
        if f[5]:
            parts = f[5].split()
            compat = parts[0].startswith("<")
            if compat:
                parts = parts[1:]
            decomp[cp] = (compat, [int(p, 16) for p in parts])
        if f[12]:
            upper[cp] = int(f[12], 16)
        if f[13]:
            lower[cp] = int(f[13], 16)

    white = bytearray(MAXCP)
    for line in read_lines(os.path.join(ucd, "PropList.txt")):
        rng, prop = [x.strip() for x in line.split(";")]
        if prop == "White_Space":
            a, b = parse_range(rng)
            for x in range(a, b + 1):
                white[x] = 1

    excluded = set()
    for line in read_lines(os.path.join(ucd, "CompositionExclusions.txt")):
        a, b = parse_range(line.split()[0])
        excluded.update(range(a, b + 1))

    fold = {}
    for line in read_lines(os.path.join(ucd, "CaseFolding.txt")):
        f = [x.strip() for x in line.split(";")]
        if f[1] in ("C", "S"):
            fold[int(f[0], 16)] = int(f[2], 16)

    def full(cp, compat):
        if cp not in decomp:
            return [cp]
        is_compat, parts = decomp[cp]
        if is_compat and not compat:
            return [cp]
        r = []
        for p in parts:
            r.extend(full(p, compat))
        return r

    canon_full, compat_full = {}, {}
    for cp in sorted(decomp):
        c = full(cp, False)
        if c != [cp]:
            canon_full[cp] = c
        k = full(cp, True)
        if k != [cp] and k != c:
            compat_full[cp] = k

    comps = {}
    for cp in sorted(decomp):
        is_compat, parts = decomp[cp]
        if is_compat or len(parts) != 2:
            continue  # compatibility mappings and singletons never compose
        if cp in excluded or ccc[cp] != 0 or ccc[parts[0]] != 0:
            continue  # exclusions, non-starter decompositions
        comps[(parts[0], parts[1])] = cp

    flags = bytearray(MAXCP)
    for cp in canon_full:
        flags[cp] |= UN_CANON
    for cp in compat_full:
        flags[cp] |= UN_COMPAT
    for cp in range(MAXCP):
        if ccc[cp]:
            flags[cp] |= UN_NONSTARTER
    for (a, b) in comps:
        flags[a] |= UN_FIRST
        flags[b] |= UN_SECOND
    for cp in range(SBASE, SBASE + SCOUNT):
        flags[cp] |= UN_CANON | UN_FIRST
    for cp in range(LBASE, LBASE + LCOUNT):
        flags[cp] |= UN_FIRST
    for cp in range(VBASE, VBASE + VCOUNT):
        flags[cp] |= UN_SECOND
    for cp in range(TBASE + 1, TBASE + TCOUNT):
        flags[cp] |= UN_SECOND

    # Case-fold orbits: code points with the same simple folding, cyclic.
    groups = {}
    for cp, f in fold.items():
        groups.setdefault(f, set([f])).add(cp)
    orbit = {}
    for g in groups.values():
        s = sorted(g)
        for i, cp in enumerate(s):
            orbit[cp] = s[(i + 1) % len(s)]

    out = []
    w = out.append
    w("// Generated by tools/gen_unicode.py from the Unicode Character Database %s (Debian's unicode-data:" % version)
    w("// UnicodeData.txt, CompositionExclusions.txt, PropList.txt, CaseFolding.txt). Do not edit; rerun")
    w("// the generator. The tables and their layout are described in tools/gen_unicode.py.")
    w('#include "model/tokenizer/unicode_data.h"')
    w("")
    w('const char ml_unicode_version[] = "%s";' % version)
    w("")

    def emit_array(ctype, name, values, per_line, fmt):
        w("const %s %s[%d] = {" % (ctype, name, len(values)))
        for i in range(0, len(values), per_line):
            w("    " + ",".join(fmt % v for v in values[i:i + per_line]) + ",")
        w("};")

    def emit_runs(name, arr):
        starts, vals = [], []
        prev = None
        for cp in range(MAXCP):
            if arr[cp] != prev:
                starts.append(cp)
                vals.append(arr[cp])
                prev = arr[cp]
        w("const uint32_t ml_%s_runs = %d;" % (name, len(starts)))
        emit_array("uint32_t", "ml_%s_starts" % name, starts, 12, "0x%X")
        emit_array("uint8_t", "ml_%s_vals" % name, vals, 24, "%d")
        w("")

    catws = bytearray(cat[cp] | (white[cp] << 5) for cp in range(MAXCP))
    emit_runs("ucat", catws)
    emit_array("uint8_t", "ml_ucat_latin1", list(catws[:256]), 24, "%d")
    w("")
    emit_runs("ccc", ccc)
    emit_runs("unflags", flags)
    emit_array("uint8_t", "ml_unflags_low", list(flags[:0x800]), 32, "%d")
    w("")

    def emit_pairs(name, d):
        keys = sorted(d)
        w("const uint32_t ml_%s_n = %d;" % (name, len(keys)))
        emit_array("uint32_t", "ml_%s_from" % name, keys, 12, "0x%X")
        emit_array("uint32_t", "ml_%s_to" % name, [d[k] for k in keys], 12, "0x%X")
        w("")

    emit_pairs("lower", lower)
    emit_pairs("upper", upper)
    emit_pairs("fold_orbit", orbit)

    pool = []
    pool_index = {}

    def intern(seq):
        key = tuple(seq)
        if key not in pool_index:
            pool_index[key] = len(pool)
            pool.extend(seq)
        return pool_index[key]

    def emit_decomp(name, d):
        keys = sorted(d)
        refs = []
        for k in keys:
            off = intern(d[k])
            assert len(d[k]) < 256 and off < (1 << 24)
            refs.append(off << 8 | len(d[k]))
        w("const uint32_t ml_%s_n = %d;" % (name, len(keys)))
        emit_array("uint32_t", "ml_%s_cp" % name, keys, 12, "0x%X")
        emit_array("uint32_t", "ml_%s_ref" % name, refs, 12, "0x%X")
        w("")

    emit_decomp("decomp_canon", canon_full)
    emit_decomp("decomp_compat", compat_full)
    w("const uint32_t ml_decomp_pool_n = %d;" % len(pool))
    emit_array("uint32_t", "ml_decomp_pool", pool, 12, "0x%X")
    w("")
    keys = sorted(comps, key=lambda p: (p[0] << 21) | p[1])
    w("const uint32_t ml_comp_n = %d;" % len(keys))
    emit_array("uint64_t", "ml_comp_key", [(a << 21) | b for a, b in keys], 8, "0x%XULL")
    emit_array("uint32_t", "ml_comp_to", [comps[k] for k in keys], 12, "0x%X")

    text = "\n".join(out) + "\n"
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
