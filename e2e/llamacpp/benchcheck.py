"""Checks shared by the bench scripts' smoke tests (test_bench_peers, test_bench_targets,
test_bench_long): a table cell's "best / median" pair and a printed ratio against the quotient of the
printed figures it was made from."""


def best_median(cell):
    """'12.3 / 11.0' -> [12.3, 11.0]."""
    return [float(v) for v in cell.replace("%", "").split("/")]


def check_best_median(name, pair, failures):
    """Two positive figures with best >= median (the printed values are rounded)."""
    if not (len(pair) == 2 and pair[0] > 0 and pair[1] > 0 and pair[0] >= pair[1] * 0.999):
        failures.append(f"{name}: best / median {pair} are not two positive figures with best >= median")


def check_ratio(name, got, num, den, failures, rel=0.003):
    """got == num / den, up to the rounding of the printed medians (0.01 plus rel of the ratio)."""
    if got is None or not den or abs(got - num / den) > 0.01 + rel * num / den:
        failures.append(f"{name}: {got} is not {num} / {den}" + (f" = {num / den:.3f}" if den else ""))
