"""Commands that build an audit: ``init``, ``next`` and ``record``."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from ..ledger import write_bytes_atomic, write_json_atomic
from ._app import (
    MAX_BATCH,
    MAX_BUDGET,
    MAX_SEED,
    MAX_STRATA,
    UserError,
    _check_out_file,
    _command,
    _console,
    _int_in,
    _one_line,
    _parse_prior,
    _prior_json,
    _versions,
    app,
    flags_for,
)
from ._directory import (
    CLI_FILE,
    CLI_FORMAT,
    CLI_MODELS,
    _load_population,
    _open,
    _population_format,
    _save_cache,
    batch_csv,
    file_sha256,
)
from ._labels import read_labels


# ------------------------------------------------------------------------------ init
@app.command()
@_command
def init(
    audit_dir: Annotated[Path, typer.Argument(metavar="AUDIT", help="Audit directory to create.")],
    scores: Annotated[Path, typer.Option("--scores", help="Population file: .parquet or .csv.")],
    score_col: Annotated[str, typer.Option("--score-col", help="Column of classifier scores.")],
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold", help="Decision threshold: predicted positive iff score >= threshold."
        ),
    ] = None,
    prediction_col: Annotated[
        str | None,
        typer.Option(
            "--prediction-col", help="Column of 0/1 predictions (instead of --threshold)."
        ),
    ] = None,
    id_col: Annotated[
        str | None,
        typer.Option("--id-col", help="Column of unique item ids (default: row number 0..N-1)."),
    ] = None,
    metric: Annotated[
        str, typer.Option(help="Metric to audit (f1, precision, recall, ...).")
    ] = "f1",
    target: Annotated[
        float | None, typer.Option(help="Acceptance target: certify metric >= target.")
    ] = None,
    level: Annotated[float, typer.Option(help="Claimed level of the certification.")] = 0.95,
    design: Annotated[str, typer.Option(help="Sampling design.")] = "posterior_variance",
    strata: Annotated[
        int, typer.Option(help="Strata per predicted side (at most one per 5 items).")
    ] = 10,
    method: Annotated[str, typer.Option(help="Stratification method.")] = "equal_size",
    prior: Annotated[
        str,
        typer.Option(
            help="Beta prior of --model independent/hierarchical: jeffreys, uniform or 'a,b'."
        ),
    ] = "jeffreys",
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="Posterior model: independent, pooled or hierarchical (default: "
            "bayes_eval.models.DEFAULT_MODEL). Recorded at init and used by every command.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed of the audit.")] = 0,
    engine: Annotated[str, typer.Option(help="memory or dask (Parquet only).")] = "memory",
    batch_size: Annotated[
        int,
        typer.Option(
            "--batch-size", help="Planned labels per batch (for the sequential correction)."
        ),
    ] = 20,
    budget: Annotated[
        int, typer.Option(help="Planned label budget (for the sequential correction).")
    ] = 2000,
    looks: Annotated[
        str,
        typer.Option(
            "--looks",
            help="Planned looks: every-batch (after every --batch-size labels) or geometric.",
        ),
    ] = "every-batch",
) -> None:
    """Create an audit directory for a scored population and pre-register its claim.

    The claim (--metric, --target, --level, --batch-size, --budget, --looks) is recorded in
    the ledger before any label; ``certify`` with another target or level says it differs.
    """
    import bayes_eval as be

    from .._validation import check_level, check_option
    from ..audit import Claim
    from ..designs import DESIGNS
    from ..metrics import METRICS
    from ..models import DEFAULT_MODEL, check_model_prior, prior_label
    from ..priors import resolve_prior
    from ..strata import STRATIFIERS, stratify

    check_option(metric, "--metric", tuple(METRICS))
    check_option(engine, "--engine", ("memory", "dask"))
    check_option(design, "--design", tuple(DESIGNS))
    check_option(method, "--method", tuple(STRATIFIERS))
    check_option(looks, "--looks", ("every-batch", "geometric"))
    model = DEFAULT_MODEL if model is None else model
    check_option(model, "--model", CLI_MODELS)
    check_level(level, "--level")
    _int_in(strata, "--strata", 1, MAX_STRATA)
    _int_in(seed, "--seed", 0, MAX_SEED)
    _int_in(batch_size, "--batch-size", 1, MAX_BATCH)
    _int_in(budget, "--budget", 1, MAX_BUDGET)
    if target is not None:
        from ..sequential.calibration import check_target

        check_target(metric, target, "--target")
    if (threshold is None) == (prediction_col is None):
        raise UserError("give exactly one of --threshold and --prediction-col")
    prior_value = _parse_prior(prior)
    try:
        check_model_prior(
            model, resolve_prior(prior_value, 1)[2], prior_name="--prior", model_name="--model"
        )
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if audit_dir.exists() and (
        not audit_dir.is_dir() or any(p.name != "lock" for p in audit_dir.iterdir())
    ):
        raise UserError(
            f"audit directory {str(audit_dir)!r} already exists and is not empty; choose a new path"
        )
    if not scores.exists():
        raise UserError(f"--scores {str(scores)!r} does not exist")
    source = {
        "path": str(scores.resolve()),
        "format": _population_format(scores),
        "score_col": score_col,
        "id_col": id_col,
        "prediction_col": prediction_col,
        "threshold": threshold,
        "engine": engine,
    }
    source["sha256"] = file_sha256(scores)
    pop = _load_population(source)
    source["fingerprint"] = pop.fingerprint()
    source["size"] = int(pop.size)
    st = stratify(pop, method=method, n_strata=strata, rng=seed)
    empty_side = _check_sides(metric, st, threshold, prediction_col)
    created = not audit_dir.exists()
    audit = None
    try:
        audit = be.Audit(
            pop,
            strata=st,
            metric=metric,
            design=design,
            prior=prior_value,
            rng=seed,
            path=audit_dir,
            model=model,
        )
        meta = {
            "format": CLI_FORMAT,
            "population": source,
            "metric": metric,
            "target": target,
            "level": level,
            "design": design,
            "strata": {"method": method, "n_strata": strata, "sizes": st.sizes.tolist()},
            "prior": _prior_json(prior_value),
            "model": model,
            "seed": seed,
            "batch_size": batch_size,
            "budget": budget,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "versions": _versions(),
        }
        audit.register_claim(
            Claim(metric, target, level, batch_size=batch_size, budget=budget, looks=looks)
        )
        write_json_atomic(audit_dir / CLI_FILE, meta)
        _save_cache(audit_dir, meta, audit)
    except BaseException:
        # remove only a directory this command made and locked (never a concurrent writer's)
        if audit is not None:
            audit.close()
            if created:
                shutil.rmtree(audit_dir, ignore_errors=True)
        raise
    audit.close()
    out = _console()
    out.print(
        f"created audit [bold]{audit_dir}[/]: N={pop.size:,} items, {st.n_strata} strata "
        f"({method}{_strata_made(st)}), metric {metric}, design {design}, prior "
        f"{prior_label(model, prior)}, model {model}, seed {seed}"
    )
    out.print(f"population {source['path']} sha256 {source['sha256'][:16]}…")
    if model == "pooled":
        out.print(_score_reading(st))
    if empty_side is not None:
        typer.echo(f"warning: {empty_side}", err=True)
    claim = (
        f"{metric} >= {target:g} at level {level:g}"
        if target is not None
        else f"{metric}, no target"
    )
    out.print(
        f"pre-registered claim: {claim}; planned looks {looks}, --batch-size {batch_size}, "
        f"--budget {budget}"
    )
    first = min(batch_size, budget)  # a budget below one batch cuts the first batch
    out.print(f"next: bayes-eval next {audit_dir} -n {first} --out batch.csv")


def _strata_made(strata) -> str:
    """Where ``stratify`` made fewer strata than ``--strata`` asked on a side: how many, and
    why (at most one per ``MIN_ITEMS_PER_STRATUM`` items, one per distinct score); else ''."""
    import numpy as np

    from ..strata import MIN_ITEMS_PER_STRATUM

    asked = getattr(strata, "requested", None)
    if asked is None:
        return ""
    side = np.asarray(strata.predicted, dtype=bool)
    made = (int((~side).sum()), int(side.sum()))
    if all(a == "auto" or m >= int(a) or m == 0 for a, m in zip(asked, made, strict=True)):
        return ""
    return (
        f"; {made[0]} / {made[1]} per side (negative / positive) where {asked[0]} / {asked[1]} "
        f"were asked: at most one stratum per {MIN_ITEMS_PER_STRATUM} items and per distinct score"
    )


def _check_sides(metric: str, strata, threshold: float | None, prediction_col: str | None):
    """Refuse a ``--metric`` the population cannot define (precision with no item predicted
    positive, e.g. a ``--threshold`` above every score); otherwise return the warning to print
    when one predicted side is empty (None when both hold items)."""
    import numpy as np

    from ..metrics import metrics_for_sides

    sizes = np.asarray(strata.sizes)
    side = np.asarray(strata.predicted, dtype=bool)
    has = {True: bool(sizes[side].sum() > 0), False: bool(sizes[~side].sum() > 0)}
    if has[True] and has[False]:
        return None
    lo, hi = float(np.min(strata.score_min)), float(np.max(strata.score_max))
    word = "positive" if not has[True] else "negative"
    if prediction_col is not None:
        why = f"--prediction-col {prediction_col!r} holds no {int(not has[True])}"
        fix = "a --prediction-col with both classes"
    elif not has[True]:
        why = f"--threshold {threshold:g} is above every score, the highest {hi:.4g}"
        fix = f"a --threshold at or below {hi:.4g}"
    else:
        why = f"--threshold {threshold:g} is at or below every score, the lowest {lo:.4g}"
        fix = f"a --threshold above {lo:.4g}"
    try:  # the metrics' own check of which sides each needs
        metrics_for_sides(metric, sizes, side)
    except ValueError:
        defined = metrics_for_sides(None, sizes, side)
        raise UserError(
            f"--metric {metric} is undefined: no item is predicted {word} ({why}); allowed: "
            f"{fix}, or --metric {', '.join(defined)}"
        ) from None
    what = (
        "true and false positives are 0 whatever the labels (recall and F1 are 0 once any "
        "positive exists)"
        if not has[True]
        else "false and true negatives are 0 whatever the labels (recall is 1)"
    )
    return f"no item is predicted {word} ({why}): {what}"


def _score_reading(strata) -> str:
    """How the pooled model reads the scores (``models._profile.score_reading``, as ``status``
    and the report say it) and their range, said at ``init`` because one score outside [0, 1]
    turns probabilities into margins without a calibration anchor."""
    import numpy as np

    from ..models._profile import score_reading

    lo, hi = float(np.min(strata.score_min)), float(np.max(strata.score_max))
    span = f"every score is {lo:.4g}" if lo == hi else f"the scores run from {lo:.4g} to {hi:.4g}"
    return f"scores read as {score_reading(strata)}; {span}"


# ------------------------------------------------------------------------------ next
@app.command("next")
@_command
def next_batch(
    audit_dir: Annotated[Path, typer.Argument(metavar="AUDIT")],
    n: Annotated[int, typer.Option("-n", "--n", help="Items to propose.")] = 20,
    out: Annotated[
        Path | None, typer.Option("--out", help="CSV file to write (default: standard output).")
    ] = None,
    pending: Annotated[
        bool,
        typer.Option(
            "--pending",
            help="Re-export the items proposed but not labelled yet (proposes nothing new).",
        ),
    ] = False,
) -> None:
    """Propose the next items to label: CSV with columns id,score,stratum."""
    from .._validation import check_positive_int

    check_positive_int(n, "-n")
    if n > MAX_BATCH:
        raise UserError(f"-n {n} is too large; allowed: 1 to {MAX_BATCH:,} items per batch")
    if out is not None:
        _check_out_file(out)
    opened = _open(audit_dir, write=not pending)
    audit, pop = opened.audit, opened.population
    if pending:
        ids = audit.pending
    else:
        remaining = int(pop.size) - int(audit.n_proposed)
        if n > remaining:
            audit.close()  # an error must not leave the writer lock to the garbage collector
            raise UserError(
                f"every one of the {pop.size:,} items has been proposed; nothing left for -n {n}"
                if remaining <= 0
                else f"-n {n} is more than the {remaining:,} items never proposed; allowed: "
                f"-n 1 to {remaining:,}"
            )
        ids = audit.propose(n)
    positions = pop.positions_of(ids)
    text = batch_csv(
        pop.ids_at(positions), pop.scores_at(positions), audit.strata.stratum_of(positions)
    )
    what = "pending item(s)" if pending else "items to label"
    if out is None:
        sys.stdout.write(text)
    else:
        try:
            write_bytes_atomic(out, text.encode("utf-8"))
        except OSError as exc:
            raise UserError(
                f"--out {str(out)!r} could not be written ({_one_line(exc)}); the "
                f"{len(positions)} proposed item(s) are kept: export them with "
                f"`bayes-eval next {audit_dir} --pending --out FILE`"
            ) from None
        _console(stderr=True).print(f"wrote {len(positions)} {what} to {out}")


@app.command()
@_command
def record(
    audit_dir: Annotated[Path, typer.Argument(metavar="AUDIT")],
    labels: Annotated[
        Path,
        typer.Argument(
            metavar="LABELS_FILE",
            help="Labels: .csv, .tsv (tab-separated) or .jsonl with columns id,label (0/1).",
        ),
    ],
    id_col: Annotated[
        str, typer.Option("--id-col", help="Column (or JSON field) of item ids.")
    ] = "id",
    label_col: Annotated[
        str, typer.Option("--label-col", help="Column (or JSON field) of the 0/1 labels.")
    ] = "label",
    annotator_col: Annotated[
        str | None,
        typer.Option(
            "--annotator-col",
            help="Column (or JSON field) naming who gave each label (kept in the ledger).",
        ),
    ] = None,
) -> None:
    """Record labels from a CSV, TSV or JSON Lines file (all or nothing)."""
    opened = _open(audit_dir, write=True)
    data = read_labels(
        labels, opened.population, id_col=id_col, label_col=label_col, annotator_col=annotator_col
    )
    before = int(opened.audit.n_labels)
    column = {"ids": f"--id-col {id_col!r} of {str(labels)!r}"}
    try:
        with flags_for(column, lambda text: text.replace("propose()", "`bayes-eval next`")):
            opened.audit.record(data.ids, data.labels, annotators=data.annotators)
    except BaseException:
        opened.audit.close()  # the error's traceback must not keep the writer lock alive
        raise
    after = int(opened.audit.n_labels)
    _console().print(
        f"recorded {after - before} new label(s) ({len(data.ids) - (after - before)} already "
        f"known); {after} labels in total"
    )
