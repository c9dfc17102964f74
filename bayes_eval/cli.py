"""The ``bayes-eval`` command line: audits run by people over days, and a one-command demo.

Commands
--------
``demo``
    An end-to-end audit, offline, on the package's demo population with a simulated judge;
    prints the certification and writes a report.
``init AUDIT --scores FILE ...``
    Create an audit directory for a scored population (Parquet or CSV).
``next AUDIT -n 20 [--out batch.csv]``
    Items to label next, as CSV with columns ``id,score,stratum``.
``record AUDIT labels.csv``
    Record human labels from a CSV with columns ``id,label`` (0/1); all or nothing.
``status AUDIT``
    Posterior table, labels per stratum, state of the acceptance rule.
``certify AUDIT [--corrected]``
    The certification ``metric >= target`` at the audit's level.
``report AUDIT --out report.html``
    Self-contained HTML (or ``.md``) posterior report.
``pair-recall ...``
    Recall of two classifiers from their overlap (Bommannavar et al.).

The audit directory
-------------------
The :class:`~bayes_eval.Audit` keeps its manifest (design, strata, prior, seed, versions,
population fingerprint) and its append-only label ledger in the directory. The CLI adds
``cli.json``: the population file (absolute path, format, columns, threshold, engine) with its
SHA-256, and the acceptance settings (metric, target, level, batch size, budget). Every command
re-hashes the population file and refuses to continue if it changed.

``next`` and ``record`` hold the directory's writer lock (``lock``) while they run; a second
writer fails at once with an error naming the holder's pid. ``status``, ``certify`` and
``report`` read without a lock.

User errors (bad options, a missing column, a label outside 0/1, an id never proposed, a changed
population file, a missing audit) print one ``error: ...`` line on stderr and exit with status 1.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core

__all__ = ["app"]

CLI_FILE = "cli.json"
CLI_FORMAT = "bayes_eval-cli/1"
#: upper bounds on sizes a user gives (a typo like --draws 1e9 must not exhaust memory)
MAX_BATCH = 1_000_000
MAX_STRATA = 10_000
MAX_N_SIMS = 200_000
MAX_DRAWS = 10_000_000
MAX_BUDGET = 100_000_000
MAX_SEED = 2**63 - 1


def _int_in(value: int, flag: str, lo: int, hi: int) -> int:
    """An integer option within [lo, hi]; the message names the flag as typed and the range."""
    if not lo <= value <= hi:
        raise UserError(f"{flag} {value} is out of range; allowed: {lo:,} to {hi:,}")
    return value


class _OneLineErrors(typer.core.TyperGroup):
    """Usage errors (``-n 2.5``, an unknown flag) as one ``error:`` line, exit status 2."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        try:  # typer >= 0.20 vendors click
            from typer._click import exceptions as cx
        except ImportError:  # pragma: no cover
            from click import exceptions as cx

        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            rv = super().main(*args, standalone_mode=False, **kwargs)
        except cx.NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except cx.UsageError as exc:
            where = ""
            param = getattr(exc, "param", None)
            opts = list(getattr(param, "opts", None) or [])
            text = " ".join(exc.format_message().split())
            if opts and not any(o in text for o in opts):
                where = f"{'/'.join(opts)}: "
            hint = f" (see `bayes-eval {exc.ctx.info_name} --help`)" if exc.ctx else ""
            typer.echo(f"error: {where}{text}{hint}", err=True)
            sys.exit(exc.exit_code)
        except cx.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except cx.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    cls=_OneLineErrors,
    name="bayes-eval",
    help="Label-efficient, honest Bayesian evaluation of deployed classifiers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


class UserError(Exception):
    """An error caused by the user's input: printed as one line, exit status 1."""


_USER_ERRORS = (
    UserError,
    ValueError,
    TypeError,
    FileNotFoundError,
    KeyError,
    PermissionError,
    IsADirectoryError,
    NotADirectoryError,
)


def _one_line(exc: BaseException) -> str:
    text = str(exc) if not isinstance(exc, KeyError) else str(exc.args[0] if exc.args else exc)
    if isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError) and exc.filename:
        text = f"{exc.strerror or type(exc).__name__}: {exc.filename}"
    text = " ".join(text.split())
    return text or type(exc).__name__


def _command(func: Callable[..., Any]) -> Callable[..., Any]:
    """Catch user errors at the command boundary: one line on stderr, exit 1, no traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except _USER_ERRORS as exc:
            typer.echo(f"error: {_one_line(exc)}", err=True)
            raise typer.Exit(code=1) from None
        except MemoryError:
            typer.echo(
                "error: out of memory; use smaller sizes (--draws, --n-sims, -n, --strata) or "
                "a machine with more memory",
                err=True,
            )
            raise typer.Exit(code=1) from None
        except OSError as exc:  # disk full, permissions, ...: still one line
            typer.echo(f"error: {_one_line(exc)}", err=True)
            raise typer.Exit(code=1) from None

    return wrapper


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, soft_wrap=True)


def _setup_matplotlib() -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")


# ------------------------------------------------------------------------------ file helpers
def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file, or of a directory (a partitioned Parquet dataset): every file's
    relative path and bytes, in sorted order."""
    path = Path(path)
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode() + b"\x00")
        with f.open("rb") as fh:
            for chunk in iter(lambda fh=fh: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _population_format(path: Path) -> str:
    if path.is_dir():
        return "parquet"
    suffix = "".join(path.suffixes[-2:]).lower() if len(path.suffixes) > 1 else path.suffix.lower()
    if suffix in (".parquet", ".pq", ".parq"):
        return "parquet"
    if suffix in (".csv", ".csv.gz", ".tsv", ".txt") or path.suffix.lower() == ".csv":
        return "csv"
    raise UserError(
        f"--scores {str(path)!r} has suffix {path.suffix!r}; allowed: .parquet (or a Parquet "
        "directory) or .csv"
    )


def _load_population(source: dict[str, Any]) -> Any:
    """Population from the ``population`` block of cli.json."""
    from .population import Population

    path = Path(source["path"])
    kw = {
        "score_col": source["score_col"],
        "id_col": source.get("id_col"),
        "prediction_col": source.get("prediction_col"),
        "threshold": source.get("threshold"),
    }
    if kw["id_col"] is not None and kw["id_col"] == kw["score_col"]:
        raise UserError(
            f"--id-col {kw['id_col']!r} is also the --score-col; allowed: a separate column of "
            "unique item ids (or no --id-col: row numbers)"
        )
    if source["format"] == "parquet":
        import pyarrow as pa

        try:
            return Population.from_parquet(path, engine=source.get("engine", "memory"), **kw)
        except (pa.ArrowException, OSError) as exc:  # pyarrow's errors do not name the file
            raise UserError(
                f"--scores {str(path)!r} is not a readable Parquet file ({_one_line(exc)})"
            ) from None
    import pandas as pd

    if source.get("engine", "memory") != "memory":
        raise UserError("--engine dask needs a Parquet file; CSV populations are read in memory")
    sep = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    try:
        header = pd.read_csv(path, nrows=0, sep=sep).columns.tolist()
    except pd.errors.EmptyDataError:
        raise UserError(f"--scores {str(path)!r} is empty; expected a header row") from None
    except UnicodeDecodeError as exc:
        raise UserError(
            f"--scores {str(path)!r} is not UTF-8 text (byte {exc.start}); allowed: UTF-8 CSV"
        ) from None
    for opt, col in (
        ("--score-col", kw["score_col"]),
        ("--id-col", kw["id_col"]),
        ("--prediction-col", kw["prediction_col"]),
    ):
        if col is not None and col not in header:
            raise UserError(f"{opt} {col!r} is not a column of {str(path)!r}; columns are {header}")
    cols = [c for c in (kw["score_col"], kw["id_col"], kw["prediction_col"]) if c is not None]
    dtypes = {kw["id_col"]: str} if kw["id_col"] is not None else None
    try:
        frame = pd.read_csv(
            path, usecols=cols, dtype=dtypes, keep_default_na=False, na_values=[""], sep=sep
        )
    except UnicodeDecodeError as exc:
        raise UserError(
            f"--scores {str(path)!r} is not UTF-8 text (byte {exc.start}); allowed: UTF-8 CSV"
        ) from None
    except pd.errors.ParserError as exc:
        raise UserError(f"--scores {str(path)!r} is not valid CSV ({_one_line(exc)})") from None
    if frame.empty:
        raise UserError(f"--scores {str(path)!r} has a header but no rows")
    scores = frame[kw["score_col"]]
    if not pd.api.types.is_numeric_dtype(scores) or pd.api.types.is_bool_dtype(scores):
        bad = pd.to_numeric(scores, errors="coerce").isna()
        first = int(bad.to_numpy().nonzero()[0][0]) if bad.any() else 0
        raise UserError(
            f"--score-col {kw['score_col']!r} of {str(path)!r} line {first + 2} holds "
            f"{str(scores.iloc[first])!r}; allowed: real numbers"
        )
    if kw["id_col"] is not None:
        frame[kw["id_col"]] = csv_ids(frame[kw["id_col"]], path, kw["id_col"])
    return Population.from_pandas(frame, **kw)


def csv_ids(raw: Any, path: Path, column: str) -> Any:
    """Ids of a CSV column exactly as written: integers only if every value is the canonical
    decimal form of an int64 (``7``, ``-3``; not ``007``, ``+7``, ``7.0``, ``7e0`` or above
    2**63 - 1), otherwise the strings themselves."""
    import numpy as np

    empty = raw.isna() | (raw == "")
    if empty.any():
        i = int(np.flatnonzero(empty.to_numpy())[0])
        raise UserError(f"--id-col {column!r} of {str(path)!r} line {i + 2}: empty id")
    if raw.str.fullmatch(r"-?[0-9]{1,19}").all():
        try:
            as_int = raw.astype(np.int64)
        except (OverflowError, ValueError):
            return raw
        if (as_int.astype(str) == raw).all():
            return as_int
    return raw


# ------------------------------------------------------------------------------ population cache
CACHE_FILE = "population_cache.npz"
CACHE_META = "population_cache.json"


def _stat(path: Path) -> dict[str, int] | None:
    if not path.is_file():
        return None  # a partitioned Parquet directory: not cached
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _save_cache(audit_dir: Path, meta: dict[str, Any], pop: Any) -> None:
    """Store the parsed population (scores, predictions, ids) for later commands.

    Written by writers only (they hold the lock), atomically; any failure just means no cache.
    """
    import numpy as np

    from .population import Population

    src = meta["population"]
    source_stat = _stat(Path(src["path"]))
    if source_stat is None or type(pop) is not Population:
        return
    tmp = audit_dir / f".{CACHE_FILE}.tmp-{os.getpid()}"
    try:
        with tmp.open("wb") as fh:
            np.savez(
                fh,
                scores=pop.scores,
                predictions=pop.predictions,
                ids=np.empty(0, dtype=np.int64) if pop.has_default_ids else pop.ids,
            )
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, audit_dir / CACHE_FILE)
        info = {
            "source": {**source_stat, "sha256": src["sha256"]},
            "fingerprint": pop.fingerprint(),
            "default_ids": bool(pop.has_default_ids),
            "cache": _stat(audit_dir / CACHE_FILE),
        }
        _write_atomic(audit_dir / CACHE_META, json.dumps(info, indent=1) + "\n")
    except OSError:  # pragma: no cover - a read-only or full disk: work without a cache
        tmp.unlink(missing_ok=True)


def _load_cache(audit_dir: Path, meta: dict[str, Any]) -> Any:
    """The cached population, or None when there is none or the source file's size or mtime
    differ from those recorded with the cache (then the file is re-hashed and re-parsed)."""
    import numpy as np

    from .population import Population

    src = meta["population"]
    try:
        info = json.loads((audit_dir / CACHE_META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    source_stat = _stat(Path(src["path"]))
    if (
        source_stat is None
        or info.get("source") != {**source_stat, "sha256": src["sha256"]}
        or info.get("cache") != _stat(audit_dir / CACHE_FILE)
        or info.get("fingerprint") != src.get("fingerprint")
    ):
        return None
    try:
        with np.load(audit_dir / CACHE_FILE, allow_pickle=False) as data:
            scores, preds, ids = data["scores"], data["predictions"], data["ids"]
    except (OSError, ValueError, KeyError):
        return None
    return Population._from_checked_arrays(
        scores,
        preds,
        None if info.get("default_ids") else ids,
        src.get("threshold"),
        info["fingerprint"],
    )


# ------------------------------------------------------------------------------ audit access
class _Opened:
    """An audit reopened from its directory, with the CLI settings."""

    def __init__(self, path: Path, meta: dict[str, Any], population: Any, audit: Any) -> None:
        self.path = path
        self.meta = meta
        self.population = population
        self.audit = audit

    @property
    def metric(self) -> str:
        return str(self.meta["metric"])

    @property
    def target(self) -> float | None:
        return self.meta.get("target")

    @property
    def level(self) -> float:
        return float(self.meta.get("level", 0.95))

    def disclosure(self) -> dict[str, Any]:
        pop = self.meta["population"]
        return {"population file": pop["path"], "population file sha256": pop["sha256"]}


def _read_meta(audit_dir: Path) -> dict[str, Any]:
    if not audit_dir.exists():
        raise UserError(
            f"audit directory {str(audit_dir)!r} does not exist; create it with `bayes-eval init`"
        )
    file = audit_dir / CLI_FILE
    if not file.is_file():
        raise UserError(
            f"{str(audit_dir)!r} is not an audit directory made by `bayes-eval init` "
            f"(no {CLI_FILE})"
        )
    try:
        meta = json.loads(file.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise UserError(f"{str(file)!r} is not valid JSON ({exc})") from None
    if meta.get("format") != CLI_FORMAT:
        raise UserError(
            f"{str(file)!r} has format {meta.get('format')!r}; this bayes-eval reads {CLI_FORMAT!r}"
        )
    return meta


def _check_population_file(meta: dict[str, Any]) -> None:
    src = meta["population"]
    path = Path(src["path"])
    if not path.exists():
        raise UserError(f"population file {str(path)!r} recorded at init no longer exists")
    digest = file_sha256(path)
    if digest != src["sha256"]:
        raise UserError(
            f"population file {str(path)!r} changed since init (sha256 {digest[:12]}… != "
            f"{src['sha256'][:12]}…); refusing to continue: restore the file or start a new audit"
        )


def _open(audit_dir: Path, *, write: bool = False) -> _Opened:
    """Reopen the audit: ``write=True`` holds the writer lock until the process ends (or
    ``opened.audit.close()``); readers take no lock. A torn ledger line cut on reopening is
    announced on stderr."""
    import bayes_eval as be

    from .ledger import LedgerRepairWarning

    meta = _read_meta(audit_dir)
    pop = _load_cache(audit_dir, meta)
    cached = pop is not None
    if pop is None:
        _check_population_file(meta)
        pop = _load_population(meta["population"])
        if pop.fingerprint() != meta["population"]["fingerprint"]:
            raise UserError(
                f"population read from {meta['population']['path']!r} has fingerprint "
                f"{pop.fingerprint()[:12]}…, not the {meta['population']['fingerprint'][:12]}… "
                "recorded at init; refusing to continue"
            )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LedgerRepairWarning)
        audit = be.Audit.open(audit_dir, pop, read_only=not write)
    for w in caught:
        if issubclass(w.category, LedgerRepairWarning):
            typer.echo(f"warning: {w.message}", err=True)
        else:  # pragma: no cover - re-issue anything else unchanged
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if write and not cached:
        _save_cache(audit_dir, meta, pop)
    return _Opened(audit_dir, meta, pop, audit)


def _parse_prior(text: str) -> Any:
    if text in ("jeffreys", "uniform"):
        return text
    parts = [p.strip() for p in text.split(",")]
    if len(parts) == 2:
        try:
            a, b = float(parts[0]), float(parts[1])
        except ValueError:
            pass
        else:
            if 0 < a < float("inf") and 0 < b < float("inf"):
                return (a, b)
    raise UserError(
        f"--prior {text!r} is not allowed; allowed: jeffreys, uniform or 'a,b' with "
        "a, b > 0 (a Beta(a, b) prior on every stratum's positive rate)"
    )


def _prior_json(prior: Any) -> Any:
    return list(prior) if isinstance(prior, tuple) else prior


def _prior_from_json(prior: Any) -> Any:
    return tuple(prior) if isinstance(prior, list) else prior


def _versions() -> dict[str, str]:
    from .report import package_versions

    return package_versions()


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
    strata: Annotated[int, typer.Option(help="Strata per predicted side.")] = 10,
    method: Annotated[str, typer.Option(help="Stratification method.")] = "equal_size",
    prior: Annotated[str, typer.Option(help="jeffreys, uniform or 'a,b'.")] = "jeffreys",
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
) -> None:
    """Create an audit directory for a scored population."""
    import bayes_eval as be

    from ._validation import check_level, check_option
    from .designs import DESIGNS
    from .metrics import METRICS
    from .strata import STRATIFIERS, stratify

    check_option(metric, "--metric", tuple(METRICS))
    check_option(engine, "--engine", ("memory", "dask"))
    check_option(design, "--design", tuple(DESIGNS))
    check_option(method, "--method", tuple(STRATIFIERS))
    check_level(level, "--level")
    _int_in(strata, "--strata", 1, MAX_STRATA)
    _int_in(seed, "--seed", 0, MAX_SEED)
    _int_in(batch_size, "--batch-size", 1, MAX_BATCH)
    _int_in(budget, "--budget", 1, MAX_BUDGET)
    if target is not None and not 0.0 <= target <= 1.0:
        raise UserError(f"--target {target!r} is outside the range [0, 1] of metric {metric!r}")
    if (threshold is None) == (prediction_col is None):
        raise UserError("give exactly one of --threshold and --prediction-col")
    prior_value = _parse_prior(prior)
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
            "seed": seed,
            "batch_size": batch_size,
            "budget": budget,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "versions": _versions(),
        }
        _write_atomic(audit_dir / CLI_FILE, json.dumps(meta, indent=2) + "\n")
        _save_cache(audit_dir, meta, pop)
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
        f"({method}), metric {metric}, design {design}, prior {prior}, seed {seed}"
    )
    out.print(f"population {source['path']} sha256 {source['sha256'][:16]}…")
    out.print(f"next: bayes-eval next {audit_dir} -n {batch_size} --out batch.csv")


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
    import pandas as pd

    from ._validation import check_positive_int

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
        if remaining <= 0:
            raise UserError(
                f"every one of the {pop.size:,} items has been proposed; nothing left for -n {n}"
            )
        ids = audit.propose(n)
    positions = pop.positions_of(ids)
    frame = pd.DataFrame(
        {
            "id": pop.ids_at(positions),
            "score": pop.scores_at(positions),
            "stratum": audit.strata.stratum_of(positions),
        }
    )
    text = frame.to_csv(index=False, float_format="%.10g")
    what = "pending item(s)" if pending else "items to label"
    if out is None:
        sys.stdout.write(text)
    else:
        try:
            _write_atomic(out, text)
        except OSError as exc:
            raise UserError(
                f"--out {str(out)!r} could not be written ({_one_line(exc)}); the "
                f"{len(frame)} proposed item(s) are kept: export them with "
                f"`bayes-eval next {audit_dir} --pending --out FILE`"
            ) from None
        _console(stderr=True).print(f"wrote {len(frame)} {what} to {out}")


def _check_out_file(out: Path) -> None:
    """An --out path that can be written: not a directory, its directory exists and is writable."""
    if out.is_dir():
        raise UserError(
            f"--out {str(out)!r} is a directory; allowed: a file path such as batch.csv"
        )
    parent = out.parent
    if not parent.is_dir():
        raise UserError(f"--out {str(out)!r}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise UserError(f"--out {str(out)!r} is not writable")


# ------------------------------------------------------------------------------ record
def read_labels_csv(path: Path, population: Any) -> tuple[Any, Any]:
    """Read and validate a labels CSV (columns ``id,label``; labels 0/1).

    Returns ``(ids, labels)`` with ids converted to the population's id type. Raises
    :class:`UserError` naming the file, the row and the bad value.
    """
    import numpy as np
    import pandas as pd

    if not path.is_file():
        raise UserError(f"labels file {str(path)!r} does not exist")
    import csv
    import io

    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"labels file {str(path)!r} is not UTF-8 text (byte {exc.start}); allowed: a UTF-8 "
            "CSV with columns id,label"
        ) from None
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    rows = [r for r in csv.reader(io.StringIO(text), delimiter=delimiter) if r]
    if not rows:
        raise UserError(f"labels file {str(path)!r} is empty; expected columns id,label")
    cols = [c.strip() for c in rows[0]]
    for lineno, row in enumerate(rows[1:], start=2):
        if len(row) != len(cols):
            raise UserError(
                f"labels file {str(path)!r} row {lineno} has {len(row)} fields, the header "
                f"{cols} has {len(cols)}; allowed: one value per column"
            )
    if len(set(cols)) != len(cols):
        raise UserError(f"labels file {str(path)!r} has duplicate columns {cols}")
    frame = pd.DataFrame(rows[1:], columns=cols, dtype=str)
    if "id" not in cols or "label" not in cols:
        raise UserError(f"labels file {str(path)!r} has columns {cols}; required: id,label")
    if frame.empty:
        raise UserError(f"labels file {str(path)!r} has no rows")
    raw_labels = frame["label"].str.strip()
    bad = ~raw_labels.isin(["0", "1"])
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise UserError(
            f"labels file {str(path)!r} line {i + 2}: label {raw_labels.iloc[i]!r} is not "
            "allowed; allowed: 0 or 1"
        )
    labels = raw_labels.astype(np.uint8).to_numpy()
    raw_ids = frame["id"].str.strip()
    empty = raw_ids == ""
    if empty.any():
        i = int(np.flatnonzero(empty.to_numpy())[0])
        raise UserError(f"labels file {str(path)!r} line {i + 2}: empty id")
    ids: Any = raw_ids.to_numpy()
    pop_ids_int = getattr(population, "has_default_ids", False) or np.issubdtype(
        np.asarray(population.ids_at(np.zeros(1, dtype=np.int64))).dtype, np.integer
    )
    if pop_ids_int:
        exact = raw_ids.str.fullmatch(r"-?(0|[1-9][0-9]{0,18})")
        conv = raw_ids.where(exact, "0").astype(object).map(int)
        exact &= conv.map(lambda v: -(2**63) <= v < 2**63)
        if not exact.all():
            i = int(np.flatnonzero(~exact.to_numpy())[0])
            raise UserError(
                f"labels file {str(path)!r} line {i + 2}: id {raw_ids.iloc[i]!r} is not an "
                "integer id of this population as written; allowed: integers written as in "
                "the population (no leading zeros, sign, decimals or exponent, e.g. 793)"
            )
        ids = conv.astype(np.int64).to_numpy()
    return ids, labels


@app.command()
@_command
def record(
    audit_dir: Annotated[Path, typer.Argument(metavar="AUDIT")],
    labels: Annotated[
        Path, typer.Argument(metavar="LABELS_CSV", help="CSV with columns id,label (0/1).")
    ],
) -> None:
    """Record labels from a CSV with columns id,label (all or nothing)."""
    opened = _open(audit_dir, write=True)
    ids, values = read_labels_csv(labels, opened.population)
    before = int(opened.audit.n_labels)
    opened.audit.record(ids, values)
    after = int(opened.audit.n_labels)
    _console().print(
        f"recorded {after - before} new label(s) ({len(ids) - (after - before)} already known); "
        f"{after} labels in total"
    )


# ------------------------------------------------------------------------------ status
def _fmt_p(x: float) -> str:
    return f"{x:.4f}"


@app.command()
@_command
def status(audit_dir: Annotated[Path, typer.Argument(metavar="AUDIT")]) -> None:
    """Posterior table, labels per stratum and the state of the acceptance rule."""
    from rich.table import Table

    opened = _open(audit_dir)
    audit = opened.audit
    out = _console()
    n_labels = int(audit.n_labels)
    out.print(
        f"[bold]audit {audit_dir}[/]: {n_labels} labels, metric {opened.metric}, design "
        f"{opened.meta['design']}, prior {opened.meta['prior']}"
    )
    pending = len(audit.pending)
    if pending:
        out.print(f"{pending} item(s) proposed but not labelled yet (record them any time)")
    if n_labels == 0:
        out.print("no labels yet: run `bayes-eval next` and `bayes-eval record`")
    post = audit.estimate()
    level = opened.level
    summ = post.summary(level=level)
    t = Table(title=f"Posterior (one-sided {level:g} bounds)")
    for col in ("metric", "mean", "sd", f"lower {level:g}", f"upper {level:g}"):
        t.add_column(col, justify="right" if col != "metric" else "left")
    tag = f"{level:g}"
    for name, row in summ.iterrows():
        style = "bold" if name == opened.metric else None
        t.add_row(
            str(name),
            _fmt_p(row["mean"]),
            _fmt_p(row["sd"]),
            _fmt_p(row[f"lower_{tag}"]),
            _fmt_p(row[f"upper_{tag}"]),
            style=style,
        )
    out.print(t)
    st = post.strata_table()
    t2 = Table(title="Strata")
    for col in ("stratum", "side", "scores", "N", "labelled", "positives", "rate"):
        t2.add_column(col, justify="right")
    for k, row in st.iterrows():
        t2.add_row(
            str(k),
            "+" if row["predicted"] else "−",
            f"[{row['score_min']:.3g}, {row['score_max']:.3g}]",
            f"{int(row['N']):,}",
            str(int(row["labelled"])),
            str(int(row["positives"])),
            f"{row['rate_mean']:.3f}",
        )
    out.print(t2)
    target = opened.target
    if target is None:
        out.print("no --target was set at init: no acceptance rule")
        return
    p = post.prob_at_least(opened.metric, target)
    lb = post.lower_bound(opened.metric, level)
    looks = _looks(audit)
    out.print(
        f"acceptance rule: {opened.metric} >= {target:g} at level {level:g}: "
        f"P = {p:.4f}, {level:g} lower bound {lb:.4f} → "
        + ("[green]would accept (uncorrected)[/]" if p >= level else "[yellow]not yet[/]")
    )
    out.print(
        f"looks so far: {looks}; with more than one look the nominal level overstates the "
        "actual one: use `bayes-eval certify --corrected`"
    )


def _looks(audit: Any) -> int:
    """Looks taken at an audit's posterior: the record calls that added labels (a person can
    look after each), or the looks of ``Audit.run``, whichever is more; at least 1."""
    from_run = int(getattr(audit, "looks", 0) or 0)
    return max(from_run, len(_label_groups(audit)), 1)


def _label_groups(audit: Any) -> list[list[tuple[Any, int]]]:
    """Labels of the audit's ledger grouped by the ``record`` call that wrote them (one time
    stamp per call), in order; each entry is a list of (id, label)."""
    from .ledger import LEDGER_NAME, read_ledger

    path = getattr(audit, "path", None)
    if path is None or not (Path(path) / LEDGER_NAME).is_file():
        return []
    records, _, _ = read_ledger(Path(path) / LEDGER_NAME)
    groups: list[list[tuple[Any, int]]] = []
    last = None
    for rec in records:
        if rec.get("type") != "label":
            continue
        if rec.get("at") != last:
            groups.append([])
            last = rec.get("at")
        groups[-1].append((rec["id"], int(rec["label"])))
    return groups


def ledger_trajectory(audit: Any, level: float, *, draws: int = 4000, max_looks: int = 200) -> Any:
    """Posterior mean and one-sided ``level`` lower bound of the audit's metric after every
    ``record`` call in its ledger, as an xarray Dataset over ``look`` (None without labels).

    Each look re-estimates from the per-stratum counts at that point (``draws`` Monte Carlo
    draws, seeded by the audit's seed and the look); with more than ``max_looks`` record calls,
    ``max_looks`` evenly spaced ones (always including the last) are shown.
    """
    import numpy as np
    import xarray as xr

    from .posterior import estimate_from_stratum_counts
    from .priors import Prior

    groups = _label_groups(audit)
    if not groups:
        return None
    strata = audit.strata
    k = int(strata.n_strata)
    pop = audit.population
    n = np.zeros(k, dtype=np.int64)
    h = np.zeros(k, dtype=np.int64)
    cum: list[tuple[np.ndarray, np.ndarray]] = []
    for group in groups:
        ids = np.asarray([g[0] for g in group])
        ys = np.asarray([g[1] for g in group], dtype=np.int64)
        st = strata.stratum_of(pop.positions_of(ids))
        n += np.bincount(st, minlength=k)
        h += np.bincount(st, weights=ys, minlength=k).astype(np.int64)
        cum.append((n.copy(), h.copy()))
    pick = np.unique(np.linspace(0, len(cum) - 1, min(max_looks, len(cum))).round().astype(int))
    rows = []
    prior = Prior(audit.prior_a, audit.prior_b, audit.prior_description)
    for i in pick:
        nn, hh = cum[i]
        post = estimate_from_stratum_counts(
            strata,
            nn,
            hh,
            prior=prior,
            finite_population=audit.finite_population,
            draws=draws,
            rng=np.random.default_rng([audit.seed, 0x7A, int(i)]),
            metrics=(audit.metric,),
        )
        rows.append((int(nn.sum()), post.mean(audit.metric), post.lower_bound(audit.metric, level)))
    arr = np.asarray(rows, dtype=np.float64)
    return xr.Dataset(
        {
            "n_labels": ("look", arr[:, 0].astype(np.int64)),
            "estimate": ("look", arr[:, 1]),
            "lower_bound": ("look", arr[:, 2]),
        },
        coords={"look": pick + 1},
        attrs={
            "lower_bound_label": f"{level:g} one-sided lower bound",
            "source": "ledger: one look per record call",
        },
    )


# ------------------------------------------------------------------------------ certify
def corrected_certification(
    audit: Any,
    post: Any,
    *,
    target: float,
    level: float,
    batch_size: int,
    budget: int,
    n_sims: int,
    max_mcse: float,
    looks: int,
    cache_dir: Path | None = None,
) -> tuple[Any, Any]:
    """Certification with the sequential correction, and the calibration's coverage curve.

    The correction is the one calibration path of the package,
    :func:`bayes_eval.sequential.correction_for`, run on the audit's procedure (its strata,
    design, prior, a look after every ``batch_size`` labels up to ``budget``) with planning rates
    chosen without the labels, and cached in the audit directory with every other correction of
    the audit (the stop rule's included). ``cache_dir`` is kept for callers; the audit's own path
    is used.
    """
    import dataclasses

    import bayes_eval as be

    from .sequential import correction_for

    procedure = audit.procedure(budget=budget, batch_size=batch_size)
    corr = correction_for(
        procedure,
        target=target,
        level=level,
        n_sims=n_sims,
        max_mcse=max_mcse,
        rates="planning",
        rng=int(audit.seed),
    )
    curve = corr.curve.assign_attrs(corrected_level=corr.level_used, level=level)
    base = be.certify(
        post,
        metric=audit.metric,
        target=target,
        level=level,
        looks=looks,
        design=str(audit.design_name),
    )
    cert = dataclasses.replace(
        base,
        accepted=bool(base.prob_at_least >= corr.level_used),
        lower_bound=post.lower_bound(audit.metric, corr.level_used),
        level_used=corr.level_used,
        correction=corr.description,
        correction_mcse=corr.mcse,
    )
    return cert, curve


def _certification(
    opened: _Opened,
    post: Any,
    corrected: bool,
    target: float | None,
    level: float | None,
    n_sims: int,
    max_mcse: float = 0.005,
) -> tuple[Any, Any]:
    import bayes_eval as be

    target = opened.target if target is None else target
    if target is None:
        raise UserError("no target: pass --target (or set it at init)")
    level = opened.level if level is None else level
    audit = opened.audit
    looks = _looks(audit)
    if not corrected:
        return be.certify(
            post,
            metric=opened.metric,
            target=target,
            level=level,
            looks=looks,
            design=str(audit.design_name),
        ), None
    with _spinner("calibrating the sequential correction (simulated audits; cached)"):
        return corrected_certification(
            audit,
            post,
            target=target,
            level=level,
            batch_size=int(opened.meta["batch_size"]),
            budget=max(int(opened.meta["budget"]), int(audit.n_labels)),
            n_sims=n_sims,
            max_mcse=max_mcse,
            looks=looks,
            cache_dir=opened.path,
        )


class _spinner:
    def __init__(self, text: str) -> None:
        self.text = text
        self._status: Any = None

    def __enter__(self) -> _spinner:
        self._status = _console(stderr=True).status(self.text)
        self._status.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._status.__exit__(*exc)


def _print_certification(cert: Any) -> None:
    from rich.panel import Panel
    from rich.table import Table

    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    rows = [
        ("claim", f"{cert.metric} >= {cert.target:g} at level {cert.level_requested:g}"),
        ("verdict", "[green]ACCEPTED[/]" if cert.accepted else "[red]NOT ACCEPTED[/]"),
        (f"P({cert.metric} >= {cert.target:g})", f"{cert.prob_at_least:.4f}"),
        ("nominal level used", f"{cert.level_used:.4f}"),
        ("lower bound at level used", f"{cert.lower_bound:.4f}"),
        ("labels", f"{cert.labels}"),
        ("looks", f"{cert.looks}"),
        ("design", f"{cert.design}"),
        ("prior / model", f"{cert.prior} / {cert.model}"),
        ("correction", f"{cert.correction}"),
    ]
    for k, v in rows:
        t.add_row(k, v)
    _console().print(Panel(t, title="Certification", expand=False))


@app.command()
@_command
def certify(
    audit_dir: Annotated[Path, typer.Argument(metavar="AUDIT")],
    corrected: Annotated[
        bool,
        typer.Option(
            "--corrected/--uncorrected",
            help="Correct the level for repeated looks (simulated, least-favourable truth).",
        ),
    ] = False,
    target: Annotated[float | None, typer.Option(help="Override the target set at init.")] = None,
    level: Annotated[float | None, typer.Option(help="Override the level set at init.")] = None,
    n_sims: Annotated[
        int, typer.Option("--n-sims", help="Simulated audits for --corrected.")
    ] = 4000,
    max_mcse: Annotated[
        float,
        typer.Option("--max-mcse", help="Largest Monte Carlo s.e. of the corrected actual level."),
    ] = 0.005,
) -> None:
    """Certify metric >= target at the audit's level."""
    _int_in(n_sims, "--n-sims", 1, MAX_N_SIMS)
    opened = _open(audit_dir)
    post = opened.audit.estimate()
    cert, _ = _certification(opened, post, corrected, target, level, n_sims, max_mcse)
    _print_certification(cert)


# ------------------------------------------------------------------------------ report
@app.command()
@_command
def report(
    audit_dir: Annotated[Path, typer.Argument(metavar="AUDIT")],
    out: Annotated[Path, typer.Option("--out", help="Output file: .html or .md.")] = Path(
        "report.html"
    ),
    corrected: Annotated[
        bool,
        typer.Option("--corrected/--uncorrected", help="Certify with the sequential correction."),
    ] = False,
    n_sims: Annotated[
        int, typer.Option("--n-sims", help="Simulated audits for --corrected.")
    ] = 4000,
    max_mcse: Annotated[
        float,
        typer.Option("--max-mcse", help="Largest Monte Carlo s.e. of the corrected actual level."),
    ] = 0.005,
) -> None:
    """Write the posterior report (self-contained HTML, or Markdown with PNG files)."""
    _setup_matplotlib()
    from .report import write_report

    _int_in(n_sims, "--n-sims", 1, MAX_N_SIMS)
    if out.suffix.lower() not in (".html", ".htm", ".md"):
        raise UserError(f"--out {str(out)!r} has suffix {out.suffix!r}; allowed: .html or .md")
    _check_out_file(out)
    opened = _open(audit_dir)
    post = opened.audit.estimate()
    cert = curve = None
    if opened.target is not None and post.n_labels > 0:
        cert, curve = _certification(opened, post, corrected, None, None, n_sims, max_mcse)
    trajectory = ledger_trajectory(opened.audit, opened.level)
    with _spinner("drawing the report"):
        write_report(
            opened.audit,
            out,
            certification=cert,
            trajectory=trajectory,
            calibration=curve,
            metric=opened.metric,
            target=opened.target,
            level=opened.level,
            title=f"bayes_eval audit report: {audit_dir.name}",
            disclosure=opened.disclosure(),
        )
    _console().print(f"wrote {out}")


# ------------------------------------------------------------------------------ pair-recall
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
) -> None:
    """Recall of two classifiers from their overlap (Bommannavar et al., Eq. 1 and 2)."""
    import numpy as np
    from rich.table import Table

    import bayes_eval as be

    _int_in(draws, "--draws", 1, MAX_DRAWS)
    _int_in(seed, "--seed", 0, MAX_SEED)
    with warnings.catch_warnings(record=True) as caught:
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
    for w in caught:
        typer.echo(f"warning: {' '.join(str(w.message).split())}", err=True)


# ------------------------------------------------------------------------------ demo
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
    strata: Annotated[int, typer.Option(help="Strata per predicted side.")] = 5,
    n_sims: Annotated[
        int,
        typer.Option("--n-sims", help="Simulated audits calibrating the sequential correction."),
    ] = 2000,
    max_mcse: Annotated[
        float,
        typer.Option("--max-mcse", help="Largest Monte Carlo s.e. of the corrected actual level."),
    ] = 0.005,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    audit_dir: Annotated[
        Path | None,
        typer.Option("--audit-dir", help="Keep the audit directory here (default: not persisted)."),
    ] = None,
) -> None:
    """End-to-end audit on the shipped demo population with a simulated judge."""
    _setup_matplotlib()
    t0 = time.perf_counter()
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    import bayes_eval as be

    from ._validation import check_level
    from .report import write_report
    from .strata import stratify

    check_level(level, "--level")
    _int_in(budget, "--budget", 1, MAX_BUDGET)
    _int_in(batch_size, "--batch-size", 1, MAX_BATCH)
    _int_in(strata, "--strata", 1, MAX_STRATA)
    _int_in(n_sims, "--n-sims", 1, MAX_N_SIMS)
    _int_in(seed, "--seed", 0, MAX_SEED)
    if not 0.0 < target < 1.0:
        raise UserError(f"--target {target!r} is outside the open interval (0, 1)")
    if out.suffix.lower() not in (".html", ".htm", ".md"):
        raise UserError(f"--out {str(out)!r} has suffix {out.suffix!r}; allowed: .html or .md")
    if not out.parent.exists():
        raise UserError(f"--out {str(out)!r}: directory {str(out.parent)!r} does not exist")
    if audit_dir is not None and audit_dir.exists() and any(audit_dir.iterdir()):
        raise UserError(f"--audit-dir {str(audit_dir)!r} already exists and is not empty")
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
    audit = be.Audit(
        pop, strata=st, metric="f1", design=design, prior="jeffreys", rng=seed, path=audit_dir
    )
    rule = be.stop.Accept(
        target, level=level, corrected=True, n_sims=n_sims, rng=seed, max_mcse=max_mcse
    )
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=_console(stderr=True), transient=False) as progress:
        cal_task = progress.add_task(
            f"calibrating the correction ({n_sims:,} simulated audits)", total=1
        )
        task = progress.add_task("labelling (simulated judge)", total=budget, start=False)

        def judge(ids: Any) -> Any:
            # the simulated judge: true labels; called once per batch by Audit.run
            if not progress.tasks[task].started:
                progress.update(cal_task, completed=1)
                progress.start_task(task)
            labels = lp.oracle(ids)
            progress.advance(task, len(labels))
            return labels

        # the "lower" column of the trajectory is the lower end of an equal-tailed interval at
        # 2 level - 1, i.e. the one-sided lower bound at `level`
        result = audit.run(
            judge, budget=budget, batch_size=batch_size, stop=rule, level=2 * level - 1
        )
        progress.update(task, total=result.n_labels, completed=result.n_labels)
        # the coverage curve for the report: the same simulation as the stop rule's (same
        # strata, design, schedule, prior, planning rates and seed, hence the same numbers)
        # the coverage curve for the report: the stop rule's own correction (one calibration)
        correction = rule.correction
    cert = result.certification
    post = result.posterior
    _print_certification(cert)
    trajectory = result.trajectory.copy()
    trajectory.attrs["lower_bound_label"] = f"{level:g} one-sided lower bound (nominal)"
    with _spinner("drawing the report"):
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
    console.print(
        f"estimated F1 {post.mean('f1'):.3f} (true {truth['f1']:.3f}) from "
        f"{post.n_labels} labels of {pop.size:,} items"
    )
    console.print(f"wrote {out} in {time.perf_counter() - t0:.1f} s")


def main() -> None:  # pragma: no cover - console entry point alternative
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
