"""The ``pair-recall`` command: recall of two classifiers from their overlap.

References
----------
Bommannavar, Kolcz & Rajaraman, ``../shared/seeds/004_bbc0a8a725a042a8.txt``.
"""

from __future__ import annotations

import re
import warnings
from typing import Annotated

import typer

from ._app import (
    MAX_DRAWS,
    MAX_SEED,
    UserError,
    _command,
    _console,
    _int_in,
    _parse_prior,
    app,
    flags_for,
)

#: pair_recall's arguments and the flags that give them
_FLAGS = {
    **{f"{k}_{i}": f"--{k}-{i}" for k in ("size", "labels", "precision") for i in ("1", "2", "12")},
    "delta_1": "--delta-1",
    "universe": "--universe",
}


def _labels_as_typed(text: str) -> str:
    """``--labels-1=(6, 5)`` as the flag takes it: ``--labels-1 6/5``."""
    return re.sub(r"(--labels-\d+)=\((\d+), (\d+)\)", r"\1 \2/\3", text)


def _parse_hn(text: str | None, name: str) -> tuple[int, int] | None:
    if text is None:
        return None
    parts = text.replace(",", "/").split("/")
    try:
        h, n = (int(p.strip()) for p in parts)
    except ValueError:
        raise UserError(
            f"{name} {text!r} is not allowed; allowed: POSITIVES/LABELLED, e.g. 42/50"
        ) from None
    return h, n


def _parse_delta(text: str | None) -> float | tuple[float, float]:
    """``--delta-1``: a positive number or ``LO,HI`` with ``0 < LO <= HI``."""
    if text is None:
        return 1.0
    allowed = "allowed: a positive number (1 = independent captures) or LO,HI with 0 < LO <= HI"
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise UserError(f"--delta-1 {text!r} is not allowed; {allowed}") from None
    if len(values) not in (1, 2) or not all(0 < v < float("inf") for v in values):
        raise UserError(f"--delta-1 {text!r} is not allowed; {allowed}")
    if len(values) == 1:
        return values[0]
    if values[0] > values[1]:
        raise UserError(f"--delta-1 {text!r} has LO > HI; {allowed}")
    return values[0], values[1]


@app.command("pair-recall")
@_command
def pair_recall_cmd(
    size_1: Annotated[int, typer.Option("--size-1", help="|A1|: items flagged by classifier 1.")],
    size_2: Annotated[int, typer.Option("--size-2", help="|A2|: items flagged by classifier 2.")],
    size_12: Annotated[int, typer.Option("--size-12", help="|A12|: items flagged by both.")],
    labels_1: Annotated[
        str | None,
        typer.Option(
            "--labels-1", help="POSITIVES/LABELLED of a uniform sample of A1, e.g. 42/50."
        ),
    ] = None,
    labels_2: Annotated[
        str | None, typer.Option("--labels-2", help="As --labels-1, for A2.")
    ] = None,
    labels_12: Annotated[
        str | None, typer.Option("--labels-12", help="As --labels-1, for A12.")
    ] = None,
    precision_1: Annotated[
        float | None,
        typer.Option(
            "--precision-1", help="Known precision of classifier 1 (instead of --labels-1)."
        ),
    ] = None,
    precision_2: Annotated[float | None, typer.Option("--precision-2")] = None,
    precision_12: Annotated[float | None, typer.Option("--precision-12")] = None,
    universe: Annotated[int | None, typer.Option(help="|U|, enables Eq. (2).")] = None,
    prior: Annotated[str, typer.Option(help="jeffreys, uniform or 'a,b'.")] = "jeffreys",
    draws: Annotated[int, typer.Option(help="Monte Carlo draws.")] = 40_000,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    level: Annotated[float, typer.Option(help="One-sided level of the bounds.")] = 0.95,
    delta_1: Annotated[
        str | None,
        typer.Option(
            "--delta-1",
            help="Dependence of the two classifiers' captures: a number (1 = independent, "
            "Assumption 1) or a range LO,HI reported by its worst case.",
        ),
    ] = None,
) -> None:
    """Recall of two classifiers from their overlap (Bommannavar et al., Eq. 1 and 2)."""
    import numpy as np
    from rich.table import Table

    import bayes_eval as be

    from .._validation import check_level

    _int_in(draws, "--draws", 1, MAX_DRAWS)
    _int_in(seed, "--seed", 0, MAX_SEED)
    check_level(level, "--level")
    with warnings.catch_warnings(record=True) as caught, flags_for(_FLAGS, _labels_as_typed):
        warnings.simplefilter("always")
        res = be.pair_recall(
            size_1,
            size_2,
            size_12,
            labels_1=_parse_hn(labels_1, "--labels-1"),
            labels_2=_parse_hn(labels_2, "--labels-2"),
            labels_12=_parse_hn(labels_12, "--labels-12"),
            universe=universe,
            prior=_parse_prior(prior),
            draws=draws,
            rng=seed,
            precision_1=precision_1,
            precision_2=precision_2,
            precision_12=precision_12,
            delta_1=_parse_delta(delta_1),
        )
    summ = res.summary(level=level)
    t = Table(
        title=f"Pair recall (|A1|={size_1:,}, |A2|={size_2:,}, |A12|={size_12:,}"
        + (f", |U|={universe:,}" if universe else "")
        + ")"
    )
    tag = f"{level:g}"
    cols = {
        "mean": "mean",
        "sd": "sd",
        f"lower_{tag}": f"lower {tag}",
        f"upper_{tag}": f"upper {tag}",
        "frac_above_1": "P(>1)",
    }
    cols = {k: v for k, v in cols.items() if k in summ.columns}
    t.add_column("quantity", no_wrap=True)
    for label in cols.values():
        t.add_column(label, justify="right", no_wrap=True)
    for name, row in summ.iterrows():
        cells = []
        for key in cols:
            v = float(row[key])
            cells.append("" if np.isnan(v) else (f"{v:,.0f}" if abs(v) >= 100 else f"{v:.4f}"))
        t.add_row(str(name), *cells)
    out = _console()
    out.print(t)
    out.print(f"{res.n_labels} labels, prior {res.prior}, {draws} draws, seed {seed}")
    d = _parse_delta(delta_1)
    if isinstance(d, tuple) and d[0] < d[1]:
        for q in ("recall_1", "recall_2"):
            if q not in res.names:
                continue
            lo, hi = res.interval_over_delta(q, prob=2 * level - 1)
            out.print(
                f"{q} over delta_1 in [{d[0]:g}, {d[1]:g}]: worst-case {level:g} lower bound "
                f"{res.lower_bound_over_delta(q, level=level):.4f}; equal-tailed "
                f"{2 * level - 1:g} intervals span [{lo:.4f}, {hi:.4f}]"
            )
    for w in caught:
        typer.echo(f"warning: {' '.join(str(w.message).split())}", err=True)
