"""The ``demo`` command: an end-to-end audit, offline, with a simulated judge."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import typer

from ._app import (
    MAX_BATCH,
    MAX_BUDGET,
    MAX_N_SIMS,
    MAX_SEED,
    MAX_STRATA,
    UserError,
    _check_out_file,
    _check_parent,
    _command,
    _console,
    _int_in,
    _max_mcse,
    _n_jobs,
    _one_line,
    _setup_matplotlib,
    app,
)
from ._looks import Decision, calibrate
from ._output import print_certification
from ._progress import bars


@app.command()
@_command
def demo(
    out: Annotated[Path, typer.Option("--out", help="Report file (.html or .md).")] = Path(
        "bayes_eval_demo_report.html"
    ),
    target: Annotated[float, typer.Option(help="Claim to certify: F1 >= target.")] = 0.65,
    level: Annotated[float, typer.Option(help="Claimed (actual) level.")] = 0.95,
    budget: Annotated[int, typer.Option(help="Most labels the simulated judge gives.")] = 2000,
    batch_size: Annotated[int, typer.Option("--batch-size", help="Labels per batch.")] = 20,
    design: Annotated[
        str,
        typer.Option(help="Sampling design (any registered design; the calibration simulates it)."),
    ] = "posterior_variance",
    strata: Annotated[
        int, typer.Option(help="Strata per predicted side (at most one per 5 items).")
    ] = 5,
    n_sims: Annotated[
        int,
        typer.Option("--n-sims", help="Simulated audits calibrating the sequential correction."),
    ] = 2000,
    max_mcse: Annotated[
        float,
        typer.Option("--max-mcse", help="Largest Monte Carlo s.e. of the corrected actual level."),
    ] = 0.005,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    n_jobs: Annotated[
        int,
        typer.Option(
            "--n-jobs",
            help="Processes for the calibration (default -1: one per CPU; the same result "
            "whatever it is).",
        ),
    ] = -1,
    audit_dir: Annotated[
        Path | None,
        typer.Option("--audit-dir", help="Keep the audit directory here (default: not persisted)."),
    ] = None,
) -> None:
    """End-to-end audit on the shipped demo population with a simulated judge."""
    _setup_matplotlib()
    t0 = time.perf_counter()
    import bayes_eval as be

    from .._validation import check_level, check_option
    from ..designs import DESIGNS
    from ..report import write_report
    from ..strata import stratify

    check_level(level, "--level")
    check_option(design, "--design", tuple(DESIGNS))
    _int_in(budget, "--budget", 1, MAX_BUDGET)
    _int_in(batch_size, "--batch-size", 1, MAX_BATCH)
    _int_in(strata, "--strata", 1, MAX_STRATA)
    _int_in(n_sims, "--n-sims", 1, MAX_N_SIMS)
    _int_in(seed, "--seed", 0, MAX_SEED)
    _n_jobs(n_jobs)
    _max_mcse(max_mcse)
    check_level(target, "--target")  # the demo's simulated claim needs 0 < target < 1
    if out.suffix.lower() not in (".html", ".htm", ".md"):
        raise UserError(f"--out {str(out)!r} has suffix {out.suffix!r}; allowed: .html or .md")
    _check_out_file(out)
    if audit_dir is not None:
        _check_audit_dir(audit_dir)
    console = _console()
    lp = be.datasets.demo_population()
    pop = lp.population
    truth = lp.true_metrics()
    console.print(f"[bold]demo population[/]: {lp.description}")
    console.print(
        f"claim to check: F1 >= {target:g} at level {level:g} "
        f"(true F1 {truth['f1']:.3f}, unknown to the audit)"
    )
    st = stratify(pop, method="equal_size", n_strata=strata, rng=seed)
    try:
        audit = be.Audit(
            pop, strata=st, metric="f1", design=design, prior="jeffreys", rng=seed, path=audit_dir
        )
    except OSError as exc:  # e.g. a parent that refuses new entries although writable
        raise UserError(
            f"--audit-dir {str(audit_dir)!r} cannot be created ({_one_line(exc)})"
        ) from None
    rule = be.stop.Accept(
        target,
        level=level,
        corrected=True,
        n_sims=n_sims,
        rng=seed,
        max_mcse=max_mcse,
        n_jobs=n_jobs,
    )
    with bars() as b:
        # the stop rule's own correction, computed here first (same procedure, rates and seed,
        # hence the same cache key): Audit.run then finds it in the cache
        calibrate(
            b,
            audit.procedure(budget=budget, batch_size=batch_size),
            target=target,
            level=level,
            n_sims=n_sims,
            max_mcse=max_mcse,
            rates=rule.rates,
            rng=seed,
            n_jobs=n_jobs,
        )
        task = b.add("simulated judge", total=budget, unit="labels")

        def judge(ids: Any) -> Any:
            # the simulated judge: true labels; called once per batch by Audit.run
            labels = lp.oracle(ids)
            b.advance(task, len(labels))
            return labels

        # the "lower" column of the trajectory is the lower end of an equal-tailed interval at
        # 2 level - 1, i.e. the one-sided lower bound at `level`
        result = audit.run(
            judge, budget=budget, batch_size=batch_size, stop=rule, level=2 * level - 1
        )
        b.update(task, result.n_labels, total=result.n_labels)
        # the coverage curve for the report: the stop rule's own correction (one calibration)
        correction = rule.correction
        cert = result.certification
        post = result.posterior
        trajectory = result.trajectory.copy()
        trajectory.attrs["lower_bound_label"] = f"{level:g} one-sided lower bound (nominal)"
        with b.step("report: figures and file"):
            write_report(
                post,
                out,
                certification=cert,
                trajectory=trajectory,
                calibration=correction,
                metric="f1",
                target=target,
                level=level,
                truth=truth,
                title="bayes_eval demo: certifying F1 on a simulated audit",
                disclosure={
                    "population": lp.description,
                    "design": design,
                    "stopped by": result.stopped_by,
                    "seed": seed,
                    "budget": budget,
                    "batch size": batch_size,
                    "population fingerprint (sha256)": pop.fingerprint(),
                    "calibration simulations": n_sims,
                },
            )
    print_certification(Decision(cert, True, None, None, None, correction))
    console.print(
        f"estimated F1 {post.mean('f1'):.3f} (true {truth['f1']:.3f}) from "
        f"{post.n_labels} labels of {pop.size:,} items"
    )
    console.print(f"wrote {out} in {time.perf_counter() - t0:.1f} s")


def _check_audit_dir(audit_dir: Path) -> None:
    """``--audit-dir``: a new or empty directory whose parent exists and is writable."""
    if audit_dir.exists():
        if not audit_dir.is_dir():
            raise UserError(f"--audit-dir {str(audit_dir)!r} exists and is not a directory")
        if any(audit_dir.iterdir()):
            raise UserError(f"--audit-dir {str(audit_dir)!r} already exists and is not empty")
        return
    _check_parent(audit_dir, "--audit-dir")
