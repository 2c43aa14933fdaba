#!/usr/bin/env python3
"""Compare two logits files (rows of VOCAB little-endian float32, as ml_run and ref_forward
write with --dump-logits). A is the run under test, B the reference.

  compare_logits.py A B --vocab V [--rtol 1e-3] [--kl T] [--any-argmax] [--ties FILE [--tie-kl T]]

Per row r (one prompt position):
  rel_err[r] = max_i |a_i - b_i| / max_i |b_i|   (relative to the reference row's largest
               logit magnitude; absolute when that is 0), reported as the worst row;
  argmax     : the lowest id among the largest values, compared between A and B;
  top5       : how many of B's 5 largest ids are among A's 5 largest;
  kl[r]      = KL(softmax(b) || softmax(a)), in float64.
Default mode: pass iff max rel_err <= rtol and the argmax agrees at every row.
--kl T mode:  pass iff the argmax agrees at every row, top5 >= 4 at every row and max kl <= T.
--any-argmax drops the argmax condition (either mode).
--ties FILE (default mode): FILE is ref_forward --near-ties output, one count per row. From the
  first row where the reference met an activation within float32 rounding of a Q8 tie, an
  engine may legitimately round that activation the other way; those rows and all later ones
  (the flip lives on in the KV cache) are held to max kl <= --tie-kl (default 1e-2) and top-5
  >= 4 instead of rtol. Rows before it keep the strict bound. The argmax rule is unchanged.
Prints one summary line. Exit 0 pass, 1 fail, 2 usage or I/O error (unreadable file, size
not a whole number of rows, A and B of different sizes, no rows).
"""
import argparse
import os
import sys

try:
    import numpy as np
except ImportError:  # a python3 early on PATH (pyenv, venv) without numpy: try Debian's
    if (os.path.exists("/usr/bin/python3") and not os.environ.get("ML_COMPARE_NO_REEXEC")
            and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3")):
        os.environ["ML_COMPARE_NO_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3", os.path.abspath(__file__)] + sys.argv[1:])
    print("compare_logits.py: numpy is required (Debian: apt-get install python3-numpy)", file=sys.stderr)
    sys.exit(2)


def load(path, vocab):
    try:
        data = np.fromfile(path, dtype="<f4")
    except OSError as e:
        raise SystemExit(usage_error(f"{path}: {e.strerror or e}"))
    if data.size == 0:
        raise SystemExit(usage_error(f"{path}: no logits (empty file)"))
    if data.size % vocab:
        raise SystemExit(usage_error(f"{path}: {data.size} floats is not a whole number of rows of {vocab}"))
    return data.reshape(-1, vocab).astype(np.float64)


def usage_error(msg):
    print(f"compare_logits.py: {msg}", file=sys.stderr)
    return 2


def log_softmax(x):
    m = x.max(axis=1, keepdims=True)
    z = x - m
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def compare(a, b):
    """Per-row metrics of A (under test) against B (reference)."""
    diff = np.abs(a - b).max(axis=1)
    scale = np.abs(b).max(axis=1)
    rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), diff)
    arg_a, arg_b = a.argmax(axis=1), b.argmax(axis=1)
    k = min(5, a.shape[1])
    top_a = np.argsort(-a, axis=1, kind="stable")[:, :k]
    top_b = np.argsort(-b, axis=1, kind="stable")[:, :k]
    top = np.array([len(set(ra) & set(rb)) for ra, rb in zip(top_a.tolist(), top_b.tolist())])
    lp_a, lp_b = log_softmax(a), log_softmax(b)
    kl = (np.exp(lp_b) * (lp_b - lp_a)).sum(axis=1)
    return rel, arg_a == arg_b, top, kl, k


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", help="logits under test")
    p.add_argument("b", help="reference logits")
    p.add_argument("--vocab", type=int, required=True, help="floats per row")
    p.add_argument("--rtol", type=float, default=1e-3, help="default mode: max relative error (default 1e-3)")
    p.add_argument("--kl", type=float, default=None, metavar="T",
                   help="distribution mode: argmax, top-5 >= 4 of 5 and max KL <= T at every row")
    p.add_argument("--any-argmax", action="store_true", help="do not require the argmax to agree")
    p.add_argument("--ties", metavar="FILE", help="ref_forward --near-ties output: rows from the first tie on use --tie-kl")
    p.add_argument("--tie-kl", type=float, default=1e-2, help="KL bound for rows at or after the first near-tie")
    args = p.parse_args(argv)  # argparse exits 2 on bad usage
    if args.vocab <= 0:
        return usage_error(f"--vocab {args.vocab}: must be > 0")
    a, b = load(args.a, args.vocab), load(args.b, args.vocab)
    if a.shape != b.shape:
        return usage_error(f"{args.a} has {a.shape[0]} rows, {args.b} has {b.shape[0]} (vocab {args.vocab})")

    rows = a.shape[0]
    finite = bool(np.isfinite(a).all() and np.isfinite(b).all())
    if finite:
        rel, same_arg, top, kl, k = compare(a, b)
    else:  # NaN/inf anywhere is a failure, not a number to compare
        rel, same_arg = np.full(rows, np.inf), np.zeros(rows, bool)
        top, kl, k = np.zeros(rows, int), np.full(rows, np.inf), min(5, args.vocab)
    worst = int(np.argmax(rel))
    need_top = min(4, k)
    argmax_ok = args.any_argmax or bool(same_arg.all())
    strict_rows = rows
    if args.ties:
        try:
            with open(args.ties) as f:
                counts = [int(line) for line in f if line.strip()]
        except (OSError, ValueError) as e:
            return usage_error(f"{args.ties}: {e}")
        if len(counts) != rows:
            return usage_error(f"{args.ties}: {len(counts)} counts for {rows} rows")
        strict_rows = next((i for i, c in enumerate(counts) if c > 0), rows)
    if args.kl is None:
        mode = f"rtol {args.rtol:g}"
        if strict_rows < rows:
            mode += f" for rows < {strict_rows}, then kl {args.tie_kl:g} after a near-tie"
        ok = (finite and argmax_ok and bool(rel[:strict_rows].max(initial=0.0) <= args.rtol)
              and bool((top[strict_rows:] >= need_top).all()) and bool(kl[strict_rows:].max(initial=0.0) <= args.tie_kl))
    else:
        mode = f"kl {args.kl:g}"
        ok = finite and argmax_ok and bool((top >= need_top).all()) and bool(kl.max() <= args.kl)
    if args.any_argmax:
        mode += ", any argmax"
    print(f"compare_logits: {'PASS' if ok else 'FAIL'} ({mode}) rows={rows} vocab={args.vocab}"
          f" max_rel_err={rel.max():.3e} (row {worst}) argmax_agree={int(same_arg.sum())}/{rows}"
          f" top5_min={int(top.min())}/{k} kl_mean={kl.mean():.3e} kl_max={kl.max():.3e}"
          + ("" if finite else " non-finite logits"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
