"""Reference values for netdojo-score's statistics, from independent implementations.

Run from the repository root with statsmodels installed (`pip install statsmodels`):

    python3 testdata/stats/reference.py > testdata/stats/reference.json

crates/netdojo-score/tests/reference.rs checks netdojo's own code against the file:
- Wilson score intervals: statsmodels' proportion_confint(method="wilson"), at the alpha
  whose normal quantile is netdojo's z = 1.96;
- the exact McNemar test: statsmodels' mcnemar(exact=True);
- cluster-robust standard errors of a mean: statsmodels' OLS on a constant with
  cov_type="cluster" (its correction G/(G-1)·(N-1)/(N-1) is netdojo's G/(G-1));
- pass@k and pass^k: exact integer binomials (math.comb), not the product netdojo uses.
"""

import json
import math
import random

import numpy as np
import statsmodels.api as sm
from scipy.stats import norm
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

ALPHA = 2 * norm.sf(1.96)


def wilson():
    out = []
    for n in [1, 2, 3, 5, 10, 12, 20, 36, 100, 120, 1000]:
        for successes in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            if 0 <= successes <= n:
                lo, hi = proportion_confint(successes, n, alpha=ALPHA, method="wilson")
                out.append({"successes": successes, "n": n, "lo": float(lo), "hi": float(hi)})
    return out


def mcnemar_exact():
    out = []
    for a_only, b_only in [(0, 1), (1, 7), (0, 12), (3, 5), (5, 5), (2, 9), (10, 25), (40, 61), (0, 30)]:
        table = [[17, a_only], [b_only, 4]]
        out.append({"a_only": a_only, "b_only": b_only, "p": float(mcnemar(table, exact=True).pvalue)})
    return out


def clustered():
    """Per task, a list of 0/1 outcomes (one per epoch)."""
    rng = random.Random(18)
    patterns = [
        [[1, 1, 1]] * 5 + [[0, 0, 0]] * 5,
        [[1, 0, 1], [0, 0, 1], [1, 1, 1], [0, 0, 0], [1, 0, 0], [0, 1, 1]],
        [[rng.random() < 0.3 + 0.1 * (t % 5) for _ in range(4)] for t in range(25)],
        [[1, 1], [1], [0, 1, 1], [0], [1, 0, 0, 0]],
    ]
    out = []
    for tasks in patterns:
        y = np.array([float(v) for t in tasks for v in t])
        groups = np.array([i for i, t in enumerate(tasks) for _ in t])
        fit = sm.OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": groups})
        out.append({"tasks": [[int(v) for v in t] for t in tasks], "mean": float(fit.params[0]),
                    "se": float(fit.bse[0])})
    return out


def pass_k():
    out = []
    for n, c, k in [(3, 0, 3), (3, 1, 3), (3, 3, 3), (5, 2, 3), (5, 4, 3), (10, 3, 1), (10, 3, 5),
                    (20, 7, 10), (50, 45, 20), (100, 1, 10)]:
        at = 1 - math.comb(n - c, k) / math.comb(n, k)
        hat = math.comb(c, k) / math.comb(n, k)
        out.append({"n": n, "c": c, "k": k, "pass_at_k": at, "pass_hat_k": hat})
    return out


print(json.dumps({"wilson": wilson(), "mcnemar": mcnemar_exact(), "clustered": clustered(),
                  "pass_k": pass_k()}, indent=1))
