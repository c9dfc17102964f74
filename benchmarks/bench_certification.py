"""Certification that holds at every truth at the target (issue 14).

For each cell (design x model x metric x look schedule) on the demo population
(``bayes_eval.datasets.demo_population()``, 5 strata per predicted side, batches of 20 up to 2,000
labels, target 0.65, claimed level 0.95):

1. calibrate the corrected rule exactly as an audit does (:func:`bayes_eval.sequential.
   calibrate_worst_case`, the body of ``correction_for``; ``--cal-sims`` audits per binding truth,
   a quarter of that per screened truth) and time it;
2. on **fresh** simulated audits (another seed, ``--eval-sims`` per truth) of every truth of the
   family, count the audits the calibrated boundary accepts: the false-accept rate and its Monte
   Carlo standard error :math:`\\sqrt{p(1-p)/S}`; a cell misses when the rate exceeds
   :math:`\\alpha + 2` s.e. at some truth (marked ``MISS``);
3. on fresh audits of a classifier 0.05 above the target (score-shaped), the mean labels to
   accept with the calibrated boundary and with the naive rule (nominal 0.95 at every look), and
   their ratio (target <= 1.3 with every-batch looks).

The evaluation uses the calibration's simulator (same engine and model; for ``pooled`` the look
model of :mod:`bayes_eval.sequential._paths`), with a different seed. Cells are run in order of
importance (the demo setting first) until ``--deadline`` seconds; cells not run are listed.

With ``--holdout`` the calibrated boundary is also run on fresh audits of truths **outside** the
family (:func:`holdout_truths`: over-confident ends, a bump or dip in one stratum, flat on one side
only, six seeded random profiles), which no calibration saw: the family is a finite set, and this
measures what its worst case is worth at truths it does not contain. ``--holdout-only``
evaluates those truths alone (for a cell whose family row already stands on the same calibration
version; the calibration itself is re-run, it is seeded and deterministic).

**A row in parts** (since session 45). Each truth's fresh audits come from a random stream of its
own, keyed by the truth's name (:func:`bayes_eval.sequential.robust.own_stream` of the evaluation
seed), so a truth's rate does not depend on which other truths run beside it, and a row's fresh
audits can be split over runs (sessions, machines): ``--save-calibration FILE`` writes the
calibrated boundary (and what the row prints of its calibration) to ``FILE`` (JSON, one entry per
cell, merged into an existing file); ``--calibration FILE`` evaluates that stored boundary instead
of calibrating again (so every part tests the same boundary, bit for bit, whatever machine runs
it); ``--truths NAMES`` evaluates only these truths (family members, held-out truths, and
``margin`` for the labels to accept above the target). Before session 45 the fresh audits of a
row's truths came from one stream in chunks of six, so earlier rows' numbers are not reproduced
by this script (their commits are in the results file).

``--n-jobs J`` fits the pooled look model's refits (calibration and fresh audits) in ``J``
processes (:mod:`bayes_eval.models._look_pool`): the same numbers, in less wall time on a machine
with spare cores.

Usage: ``uv run python benchmarks/bench_certification.py [--cal-sims 2000] [--eval-sims 4000]
[--holdout | --holdout-only] [--n-jobs -1] [--save-calibration FILE | --calibration FILE]
[--truths NAMES]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import bayes_eval as be
from bayes_eval._loop import BatchPlan
from bayes_eval._validation import check_n_jobs
from bayes_eval.designs import make_design
from bayes_eval.models._look_pool import RefitPool
from bayes_eval.priors import Prior
from bayes_eval.sequential._linear import least_favourable_truth
from bayes_eval.sequential._paths import simulate_paths
from bayes_eval.sequential.boundary import fit_boundary, labels_used
from bayes_eval.sequential.robust import (
    DEFAULT_POSTERIOR_TRUTHS,
    _score_rates,
    calibrate_worst_case,
    own_stream,
    screening_keep,
)
from bayes_eval.sequential.truths import ADDED_PROFILES, PROFILES, blind_spot

HERE = Path(__file__).resolve().parent

TARGET = 0.65
LEVEL = 0.95
BATCH = 20
BUDGET = 2000


def _cells(models):
    designs = ("posterior_variance", "random", "proportional", "online_optimal")
    metrics = ("f1", "precision", "recall")
    looks = ("every", "geometric")
    cells = list(itertools.product(models, designs, metrics, looks))
    demo = ("independent", "posterior_variance", "f1", "every")
    pooled_demo = ("pooled", "posterior_variance", "f1", "every")
    first = [c for c in (demo, pooled_demo) if c in cells]
    # independent before pooled (pooled is ~50x slower per simulated audit)
    rest = sorted((c for c in cells if c not in first), key=lambda c: (c[0] != "independent",))
    return first + rest


#: held-out truths: score-rate profiles that are *not* in the calibration's family
#: (:data:`bayes_eval.sequential.truths.PROFILES`), each moved to the target the same way
HOLDOUT_RANDOM = 6

#: the stage key of a truth's fresh-audit stream (``own_stream``; the calibration's are 0 and 1,
#: and the evaluation's generator has another seed)
EVAL_STAGE = 2


def _same_as(version):
    """What ``WorstCaseCalibration.same_as_version`` means for a row."""
    later = sorted({v for v in ADDED_PROFILES.values() if v > version})
    if not later:
        return f"the members added in version {version} changed the boundary (a new row)"
    return (
        f"the members added after version {version} ("
        + ", ".join(n for n, v in ADDED_PROFILES.items() if v > version)
        + f") bind no fitted boundary: it is version {version}'s bit for bit"
    )


def holdout_truths(st, metric, seed=20261124):
    """Truths at the target outside the family (``--holdout``): (name, positives) pairs.

    ``ends``: scores over-confident beyond |logit| 1 (slope 1/3 there; an over-fitted booster);
    ``dip_pos``: the middle stratum of the predicted positives 2.5 logits below the scores;
    ``flat_pos``: one rate on the predicted positives only, scores on the negatives. Since
    calibration version 9 the family holds ``bump_neg`` (+2.5 at the middle fifth of the
    predicted negatives) and ``flat_neg``, which were held out before; their held-out successors
    move the bump: ``bump_neg_low`` (+2 at the stratum a quarter up the predicted negatives),
    ``bump_neg_high`` (+3.5 three quarters up), ``bump_neg_wide`` (+1.5 on the two strata a
    quarter and half up), and ``flat_neg_shifted`` (flat predicted negatives with the predicted
    positives' scores 1.5 logits up). ``floor_neg`` (a blind spot, session 21) joined the family
    in calibration version 14 after a held-out miss (6.38 % ± 0.39 %, pooled online_optimal x F1
    x every-batch looks); its held-out successors (session 38, defined before any run):
    ``floor_neg_strong`` (every predicted negative's rate raised by twice that side's mean score
    rate, where the family's member adds half), ``floor_neg_low`` (the lower half of the
    predicted-negative strata raised by that mean, the upper half as the scores: a blind spot
    among the lowest scores, like the widened topics of ``heldout_populations``) and
    ``ceiling_pos`` (the predicted positives' counterpart: each one's miss rate ``1 - r`` raised
    by half that side's mean, false positives the scores do not see). ``floor_neg_low`` joined
    the family in version 15 after a held-out miss (6.73 % ± 0.40 %, pooled posterior_variance x
    recall x every-batch looks), with ``floor_neg_bottom`` (the lowest quarter raised by twice
    the mean); their held-out successors (session 39, defined before any version-15 run) sit
    between and beyond the grid's points: ``floor_neg_low_weak`` and ``floor_neg_low_strong``
    (the lower half raised by half and twice the mean), ``floor_neg_mid`` (the middle half, a
    quarter to three quarters up, raised by the mean) and ``floor_neg_bottom_strong`` (the
    lowest quarter raised by four times the mean).
    ``random_i``: ``a + b x`` plus a random walk over each side's strata (a ~ N(0, 1),
    b ~ U(0.3, 2.5), steps N(0, 0.8^2)), seeded.
    """
    from scipy import special

    sizes = np.asarray(st.sizes, dtype=np.int64)
    pred = np.asarray(st.predicted, dtype=bool)
    prior = Prior.resolve("jeffreys", sizes.size)
    x = special.logit(np.clip(_score_rates(st, None, prior.a, prior.b), 1e-6, 1 - 1e-6))
    profiles = {}
    ax = np.abs(x)
    profiles["ends"] = np.where(ax > 1, np.sign(x) * (1 + (ax - 1) / 3), x)
    neg, posi = np.flatnonzero(~pred), np.flatnonzero(pred)

    def side_mean(side):
        # the logit of the size-weighted mean score rate of one side
        return special.logit(np.average(special.expit(x[side]), weights=sizes[side]))

    out = x.copy()
    out[posi[posi.size // 2]] -= 2.5
    profiles["dip_pos"] = out
    out = x.copy()
    out[pred] = side_mean(pred)
    profiles["flat_pos"] = out
    for name, where, shift in (
        ("bump_neg_low", [neg.size // 4], 2.0),
        ("bump_neg_high", [(3 * neg.size) // 4], 3.5),
        ("bump_neg_wide", sorted({neg.size // 4, neg.size // 2}), 1.5),
    ):
        out = x.copy()
        out[neg[where]] += shift
        profiles[name] = out
    out = x.copy()
    out[~pred] = side_mean(~pred)
    out[pred] = x[pred] + 1.5
    profiles["flat_neg_shifted"] = out
    # blind spots beside the family's floor_neg (version 14: 0.5 x the side's mean rate on
    # every predicted negative): a stronger floor, a floor on the lower half of the predicted
    # negatives only, and the predicted positives' counterpart (false positives the scores do
    # not see: each predicted positive's miss rate 1 - r raised by half that side's mean)
    # version 15's grid holds the lower half + r0 and the lowest quarter + 2 r0 (r0: the
    # predicted negatives' mean score rate); its successors
    half, quarter = neg[: max(1, neg.size // 2)], neg[: max(1, neg.size // 4)]
    middle = neg[neg.size // 4 : neg.size // 4 + max(1, neg.size // 2)]
    for name, where, multiple in (
        ("floor_neg_strong", neg, 2.0),
        ("floor_neg_low_weak", half, 0.5),
        ("floor_neg_low_strong", half, 2.0),
        ("floor_neg_mid", middle, 1.0),
        ("floor_neg_bottom_strong", quarter, 4.0),
    ):
        profiles[name] = blind_spot(x, sizes, pred, where, multiple)
    out = x.copy()
    miss = 1.0 - special.expit(x[pred])
    gap = 0.5 * np.average(miss, weights=sizes[pred])
    out[pred] = special.logit(np.clip(1.0 - (miss + gap), 1e-6, 1 - 1e-6))
    profiles["ceiling_pos"] = out
    gen = np.random.default_rng(seed)
    for i in range(HOLDOUT_RANDOM):
        a, b = gen.normal(0, 1), gen.uniform(0.3, 2.5)
        walk = np.empty_like(x)
        for side in (~pred, pred):
            idx = np.flatnonzero(side)
            walk[idx] = np.cumsum(gen.normal(0, 0.8, idx.size))
        profiles[f"random_{i + 1}"] = a + b * x + walk
    out = []
    for name, logits in profiles.items():
        p = least_favourable_truth(sizes, pred, special.expit(logits), metric=metric, value=TARGET)
        out.append((name, p))
    return out


def calibrate_cell(st, cell, cal_sims, seed, draws=None, n_jobs=None):
    """Calibrate one cell as an audit does: ``(WorstCaseCalibration, seconds)``."""
    model, design, metric, looks = cell
    t0 = time.perf_counter()
    cal = calibrate_worst_case(
        st,
        metric=metric,
        target=TARGET,
        level=LEVEL,
        design=design,
        batch_size=BATCH,
        budget=BUDGET,
        looks=_schedule(looks),
        model=model,
        n_sims=cal_sims,
        rng=seed,
        draws=draws,
        n_jobs=n_jobs,
    )
    return cal, time.perf_counter() - t0


def _schedule(looks):
    return None if looks == "every" else be.sequential.geometric_looks(BATCH, BUDGET)


def _commit():
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, cwd=HERE
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def calibration_record(cal, cal_s, cell, cal_sims, seed, draws):
    """What the evaluation and the printed row need of a calibration, as plain JSON data (floats
    round-trip exactly): the boundary, the family's truths and their in-sample rates."""
    b = cal.boundary
    return {
        "cell": "/".join(cell),
        "calibration_version": be.sequential.CALIBRATION_VERSION,
        "commit": _commit(),
        "cal_sims": cal_sims,
        "seed": seed,
        "draws": draws,
        "cal_s": cal_s,
        "looks": b.looks.tolist(),
        "nominal": b.nominal.tolist(),
        "shape": float(b.shape),
        "attainable": bool(b.attainable),
        "truths": [
            {
                "name": t.name,
                "positives": np.asarray(t.positives).tolist(),
                "n_sims": int(p.shape[0]),
                "rate": float(r),
                "mcse": float(m),
            }
            for t, p, r, m in zip(cal.truths, cal.prob, b.rates, b.mcse, strict=True)
        ],
        "margin_positives": (
            None if cal.margin_positives is None else np.asarray(cal.margin_positives).tolist()
        ),
        "same_as_version": int(cal.same_as_version),
        "describe": cal.describe(),
    }


def save_calibration(path, record):
    """Merge ``record`` into the JSON file ``path`` (one entry per cell), written atomically."""
    path = Path(path)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[record["cell"]] = record
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def load_calibrations(path):
    """The stored calibrations of ``--calibration FILE``, by cell (an error naming the flag)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"error: --calibration {path}: cannot be read ({exc})") from None
    if not isinstance(data, dict) or not all(
        isinstance(v, dict) and "nominal" in v for v in data.values()
    ):
        raise SystemExit(f"error: --calibration {path}: not a file written by --save-calibration")
    return data


def family_names():
    """Every name a family truth can have in this benchmark (for ``--truths``)."""
    return list(PROFILES) + [f"posterior_{i + 1}" for i in range(DEFAULT_POSTERIOR_TRUTHS)]


def audit_plan(st, dsg, schedule):
    """The benchmark's batch plan (batches of ``BATCH`` up to ``BUDGET``) on strata ``st`` for
    design ``dsg``, with looks ``schedule`` (``None``: after every batch)."""
    sizes = np.asarray(st.sizes, dtype=np.int64)
    return BatchPlan.build(
        dsg,
        batch_size=BATCH,
        budget=BUDGET,
        total=int(sizes.sum()),
        n_strata=sizes.size,
        looks=schedule,
        strict_budget=True,
    )


def fresh_paths(st, dsg, plan, prior, metric, target, model, positives, n_sims, rng, draws, pool):
    """``P(metric >= target)`` at every look of ``n_sims`` simulated audits of one truth
    (``positives`` per stratum), ``(S, J)``: the calibration's simulator on fresh streams."""
    return simulate_paths(
        sizes=np.asarray(st.sizes, dtype=np.int64),
        predicted=np.asarray(st.predicted, dtype=bool),
        positives=positives,
        prior_a=prior.a,
        prior_b=prior.b,
        metric=metric,
        target=target,
        design=dsg,
        batches=list(plan.batches),
        schedule=plan.looks,
        finite_population=True,
        n_sims=n_sims,
        rng=rng,
        model=model,
        strata=st,
        draws=draws,
        pool=pool,
    )[0]


def evaluate_cell(st, rec, eval_sims, seed, draws=None, n_jobs=None, holdout=(), only=None):
    """Fresh audits of a calibrated boundary ``rec`` (:func:`calibration_record`).

    ``holdout``: the held-out (name, positives) pairs to evaluate; ``only``: a set of truth
    names (family, held-out, ``"margin"``) to evaluate, ``None`` for all. Each truth's audits
    come from its own stream keyed by its name, so the rates do not depend on ``only``.
    """
    model, design, metric, looks = rec["cell"].split("/")
    nominal = np.asarray(rec["nominal"], dtype=np.float64)
    attainable = rec["attainable"]
    sizes = np.asarray(st.sizes)
    dsg = make_design(design)
    plan = audit_plan(st, dsg, _schedule(looks))
    if not np.array_equal(plan.looks, np.asarray(rec["looks"])):
        raise SystemExit(f"error: --calibration: {rec['cell']}'s looks are not this plan's")
    prior = Prior.resolve("jeffreys", sizes.size)

    def wanted(name):
        return only is None or name in only

    fam = [(t["name"], np.asarray(t["positives"], dtype=np.int64)) for t in rec["truths"]]
    fam = [(n, p) for n, p in fam if wanted(n)]
    held = [(n, p) for n, p in holdout if wanted(n)]
    margin = rec["margin_positives"]
    margin = [] if margin is None or not wanted("margin") else [("margin", np.asarray(margin))]
    gen = np.random.default_rng(seed + 1000)

    def paths(positives, name, pool):
        rng = own_stream(gen, name, EVAL_STAGE)
        return fresh_paths(
            st, dsg, plan, prior, metric, TARGET, model, positives, eval_sims, rng, draws, pool
        )

    # one truth at a time: its own stream, and the pooled look model's working set stays small
    # (25 truths x 4,000 audits at once needed 17 GB)
    with RefitPool(check_n_jobs(n_jobs)) as pool:  # the same paths in any number of processes
        prob = {name: paths(p, name, pool) for name, p in [*fam, *held, *margin]}

    def accept_rates(names):
        # an unattainable boundary never accepts (the rule refuses even P = 1)
        r = np.array([(prob[n] >= nominal).any(axis=-1).mean() for n in names]) * float(attainable)
        return r, np.sqrt(np.maximum(r * (1 - r), 1.0 / eval_sims) / eval_sims)

    def naive(names):
        return np.array([(prob[n] >= LEVEL).any(axis=-1).mean() for n in names])

    fam_names = [n for n, _ in fam]
    held_names = [n for n, _ in held]
    rates, se = accept_rates(fam_names)
    h_rates, h_se = accept_rates(held_names)
    worst = max(rec["truths"], key=lambda t: t["rate"])
    out = {
        "truths": fam_names,
        "rates": rates,
        "se": se,
        "holdout": held_names,
        "holdout_rates": h_rates,
        "holdout_se": h_se,
        "holdout_naive": naive(held_names),
        "naive_worst": float(naive(fam_names).max()) if fam_names else np.nan,
        # truths simulated at more than cal_sims (stage 2's KEEP_TRUTHS and stage 3's)
        "full": [t["name"] for t in rec["truths"] if t["n_sims"] > rec["cal_sims"]],
        "worst_in_sample": (worst["name"], worst["rate"], worst["mcse"]),
    }
    if margin:
        good = prob["margin"]
        lab = labels_used(good, plan.looks, nominal).astype(float)
        nv = labels_used(good, plan.looks, np.full(plan.looks.shape, LEVEL)).astype(float)
        out["labels"] = (lab.mean(), lab.std(ddof=1) / np.sqrt(lab.size))
        out["naive"] = (nv.mean(), nv.std(ddof=1) / np.sqrt(nv.size))
    return out


def two_stage_boundary(cal):
    """The boundary calibration version 10 fitted (stages 1 and 2 only) on ``cal``'s own paths:
    each truth's first ``n_sims / 4`` paths are its screening ones, and stage 3's come after
    stage 2's, so version 10 saw exactly these."""
    n_first = min(p.shape[0] for p in cal.prob)
    first = [p[:n_first] for p in cal.prob]
    keep = screening_keep(first, cal.looks, level=cal.level, margin_prob=cal.margin_prob)
    fam = [p if i in keep else first[i] for i, p in enumerate(cal.prob)]
    return fit_boundary(fam, cal.looks, level=cal.level, margin_prob=cal.margin_prob)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cal-sims", type=int, default=2000)
    ap.add_argument("--eval-sims", type=int, default=4000)
    ap.add_argument("--other-eval-sims", type=int, default=1000)
    ap.add_argument("--other-cal-sims", type=int, default=2000)
    ap.add_argument("--pooled-cal-sims", type=int, default=200)
    ap.add_argument("--pooled-eval-sims", type=int, default=200)
    ap.add_argument("--models", default="independent,pooled")
    ap.add_argument("--deadline", type=float, default=3600.0)
    ap.add_argument(
        "--n-jobs",
        type=int,
        default=None,
        help="processes for the pooled look model's refits (-1: one per CPU; the same numbers)",
    )
    ap.add_argument("--designs", default="", help="comma list: run only these designs")
    ap.add_argument("--skip-demo", action="store_true", help="skip the demo cell")
    ap.add_argument("--metrics", default="", help="comma list: run only these metrics")
    ap.add_argument("--looks", default="", help="comma list: run only these look schedules")
    ap.add_argument(
        "--draws",
        type=int,
        default=40_000,
        help="posterior draws per look of the audit (their noise is simulated; 0: exact P)",
    )
    ap.add_argument(
        "--calibrate-only",
        action="store_true",
        help="only calibrate each cell and print its boundary and in-sample rates per truth "
        "(which truths have the full paths): a cell whose calibration is unchanged keeps its "
        "fresh-audit row",
    )
    ap.add_argument(
        "--holdout",
        action="store_true",
        help="also evaluate the calibrated boundary at truths outside the family "
        "(holdout_truths), with the same fresh audits per truth",
    )
    ap.add_argument(
        "--holdout-only",
        action="store_true",
        help="evaluate the calibrated boundary at the held-out truths and the family's members "
        "added since version 13 only (no fresh audits of the other family truths: a cell whose "
        "family row stands on the same boundary)",
    )
    ap.add_argument(
        "--holdout-names",
        default="",
        help="comma list: evaluate only these held-out truths (e.g. the ones defined after a "
        "cell's held-out row was run)",
    )
    ap.add_argument(
        "--save-calibration",
        default="",
        metavar="FILE",
        help="write each cell's calibrated boundary to FILE (JSON, merged by cell), so that "
        "--calibration FILE can evaluate it in parts",
    )
    ap.add_argument(
        "--calibration",
        default="",
        metavar="FILE",
        help="evaluate the boundaries stored in FILE by --save-calibration instead of "
        "calibrating (every cell run must be in it)",
    )
    ap.add_argument(
        "--truths",
        default="",
        help="comma list: evaluate only these truths (family members, held-out truths, and "
        "'margin' for the labels to accept above the target); each truth's fresh audits come "
        "from its own stream, so a row can be evaluated in parts",
    )
    args = ap.parse_args()
    t_start = time.perf_counter()
    lp = be.datasets.demo_population()
    st = be.stratify(lp.population, method="equal_size", n_strata=5, rng=0)
    alpha = 1 - LEVEL
    print("# Certification at every truth at the target (issue 14)")
    print(
        f"demo population ({lp.description}); 10 strata; target {TARGET} at level {LEVEL}; "
        f"batches of {BATCH} to {BUDGET} labels; 'every' = a look after every batch, "
        "'geometric' = 20, 40, ..., 1280, 2000 labels (online_optimal: its own batch schedule)"
    )
    print(
        f"calibration: {args.cal_sims} audits per binding truth (independent), "
        f"{args.pooled_cal_sims} (pooled); evaluation on fresh audits: {args.eval_sims} per truth "
        f"(independent, demo cells = posterior_variance x F1), {args.other_eval_sims} (other "
        f"independent cells), {args.pooled_eval_sims} (pooled). MISS = rate > alpha + 2 s.e.; "
        f"P at each look from {args.draws or 'exact'} posterior draws (their noise simulated)"
    )
    sys.stdout.flush()
    models = tuple(args.models.split(","))
    names = tuple(n for n in args.holdout_names.split(",") if n)
    known = [name for name, _ in holdout_truths(st, "f1")]  # the same names for every metric
    unknown = sorted(set(names) - set(known))
    if unknown:  # before any calibration, not after the first one
        raise SystemExit(
            f"error: --holdout-names {','.join(unknown)}: not held-out truths; allowed: "
            + ", ".join(known)
        )
    only = {n for n in args.truths.split(",") if n} or None
    allowed = [*family_names(), *known, "margin"]
    if only is not None and sorted(only - set(allowed)):
        raise SystemExit(
            f"error: --truths {','.join(sorted(only - set(allowed)))}: not truths of this "
            "benchmark; allowed: " + ", ".join(allowed)
        )
    if args.calibration and (args.calibrate_only or args.save_calibration):
        raise SystemExit(
            "error: --calibration: evaluates a stored boundary; allowed without "
            "--calibrate-only and --save-calibration"
        )
    stored = load_calibrations(args.calibration) if args.calibration else {}
    if args.holdout_only:  # the members added since version 13, the held-out truths, no margin
        keep = set(ADDED_PROFILES) | set(known)
        only = keep if only is None else only & keep
    skipped = []
    misses = 0
    holdout_misses = 0
    ratios = []
    for cell in _cells(models):
        model, design, metric, looks = cell
        if args.designs and design not in args.designs.split(","):
            continue
        if args.skip_demo and cell[1:] == ("posterior_variance", "f1", "every"):
            continue
        if args.metrics and metric not in args.metrics.split(","):
            continue
        if args.looks and looks not in args.looks.split(","):
            continue
        if time.perf_counter() - t_start > args.deadline:
            skipped.append(cell)
            continue
        pooled = model != "independent"
        demo = design == "posterior_variance" and metric == "f1"
        cs = args.pooled_cal_sims if pooled else (args.cal_sims if demo else args.other_cal_sims)
        es = args.pooled_eval_sims if pooled else (args.eval_sims if demo else args.other_eval_sims)
        key = "/".join(cell)
        try:
            if args.calibration:
                if key not in stored:
                    raise SystemExit(
                        f"error: --calibration {args.calibration}: no stored calibration of "
                        f"{key}; it holds: " + ", ".join(stored)
                    )
                rec = stored[key]
            else:
                cal, cal_s = calibrate_cell(
                    st, cell, cs, seed=11, draws=args.draws or None, n_jobs=args.n_jobs
                )
                rec = calibration_record(cal, cal_s, cell, cs, 11, args.draws or None)
                if args.save_calibration:
                    save_calibration(args.save_calibration, rec)
            if not args.calibrate_only:
                asked = (
                    args.holdout or args.holdout_only or (only is not None and only & set(known))
                )
                held = holdout_truths(st, metric) if asked else []
                if names:  # checked above, before any cell
                    held = [(name, p) for name, p in held if name in names]
                r = evaluate_cell(
                    st,
                    rec,
                    es,
                    seed=11,
                    draws=args.draws or None,
                    n_jobs=args.n_jobs,
                    holdout=held,
                    only=only,
                )
        except ValueError as exc:
            print(f"\n## {model} / {design} / {metric} / {looks}: not run ({exc})")
            continue
        if args.calibrate_only:
            print(f"\n## {model} / {design} / {metric} / {looks} looks: calibration {cal_s:.1f} s")
            print("  " + cal.describe())
            print(f"  nominal per look: {np.array2string(cal.boundary.nominal, precision=6)}")
            for t, p, rate, se in zip(
                cal.truths, cal.prob, cal.boundary.rates, cal.boundary.mcse, strict=True
            ):
                print(f"    {t.name:14s} n={p.shape[0]:5d} in-sample {rate:.4f} ± {se:.4f}")
            print("  " + _same_as(cal.same_as_version))
            old = two_stage_boundary(cal)
            diff = float(np.abs(old.nominal - cal.boundary.nominal).max())
            print(
                "  version 10's boundary (stages 1-2 on the same paths): "
                + ("IDENTICAL" if diff == 0.0 else f"differs, max |d nominal| {diff:.2e}")
                + f" ({old.nominal[0]:.6f} -> {old.nominal[-1]:.6f}, shape {old.shape:g})"
            )
            sys.stdout.flush()
            continue
        print(
            f"\n## {model} / {design} / {metric} / {looks} looks  (calibration {rec['cal_s']:.1f} s"
            f"{' (stored: ' + args.calibration + ')' if args.calibration else ''}"
            f", {rec['cal_sims']} per binding truth; boundary {rec['nominal'][0]:.4f} -> "
            f"{rec['nominal'][-1]:.4f}, shape {rec['shape']:g}"
            f"{'' if rec['attainable'] else ', UNATTAINABLE'}; naive rule worst "
            f"{r['naive_worst']:.3f}{'' if only is None else ' among the truths evaluated'})"
        )
        if only is not None:
            done = [*r["truths"], *r["holdout"], *(["margin"] if "labels" in r else [])]
            print("  truths evaluated in this part: " + ", ".join(done))
        wn, wr, ws = r["worst_in_sample"]
        print(
            f"  calibration: full paths at {', '.join(r['full'])}; worst in-sample {wn} "
            f"{wr:.4f}±{ws:.4f}"
        )
        line = []
        for name, p, s in zip(r["truths"], r["rates"], r["se"], strict=True):
            miss = p > alpha + 2 * s
            misses += miss
            line.append(f"{name} {p:.4f}±{s:.4f}{' MISS' if miss else ''}")
        if args.holdout_only:
            print(
                "  family truths: only the members added since version 13 evaluated "
                "(--holdout-only); " + _same_as(rec["same_as_version"])
            )
        if line:
            print("  false accepts (fresh, " + str(es) + " per truth): " + "; ".join(line))
        if r["holdout"]:
            line = []
            for name, p, s, nv in zip(
                r["holdout"], r["holdout_rates"], r["holdout_se"], r["holdout_naive"], strict=True
            ):
                miss = p > alpha + 2 * s
                holdout_misses += miss
                line.append(f"{name} {p:.4f}±{s:.4f}{' MISS' if miss else ''} (naive {nv:.3f})")
            print("  held-out truths (not in the family): " + "; ".join(line))
        if "labels" in r:
            (m, ms), (n, ns) = r["labels"], r["naive"]
            ratio = m / n
            if looks == "every":
                ratios.append((cell, ratio))
            print(
                f"  labels to accept at target + 0.05: corrected {m:.0f}±{ms:.0f}, naive "
                f"{n:.0f}±{ns:.0f}, ratio {ratio:.2f}{' (target 1.3: MISS)' if ratio > 1.3 else ''}"
            )
        sys.stdout.flush()
    print(f"\ncells with a miss at some truth: {misses} truth-cells")
    if args.holdout or args.holdout_only:
        print(f"held-out truths above alpha + 2 s.e.: {holdout_misses} truth-cells")
    if ratios:
        print(
            "labels ratio (every-batch looks): "
            + ", ".join(f"{'/'.join(c[:3])} {v:.2f}" for c, v in ratios)
        )
    if skipped:
        print("not run (time): " + ", ".join("/".join(c) for c in skipped))
    print(f"total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
