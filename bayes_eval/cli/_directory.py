"""The audit directory of the CLI: ``cli.json``, the population file, its stored arrays, reopening.

``cli.json`` records the population file (absolute path, format, columns, threshold, engine) with
its SHA-256 and the acceptance settings. ``init`` also stores the parsed population, its strata
and the audit's sampling order as memory-mappable arrays (:mod:`bayes_eval.audit._store`), with
the population file's size, mtime and SHA-256; later commands open those instead of parsing the
file, re-stratifying and indexing ids, so ``next`` and ``record`` cost O(batch), not O(N). A
population file whose size or mtime differ is hashed again, and a changed file is refused.
Directories without stored arrays (older releases, Dask-backed populations) are read from the
population file as before; the first writer command then stores the arrays. An audit made with
``init --model pooled`` also stores the pooled model's score profile with the arrays (computed
once; a store without it gets it on first use, :func:`bayes_eval.audit._store.ensure_profile`).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import re
import warnings
from pathlib import Path
from typing import Any

from .._protocols import PopulationLike
from ..audit import Audit
from ..audit._store import ensure_profile, open_store, update_extra, write_store
from ..ledger import MANIFEST_NAME
from ._app import UserError, _one_line, flags_for

CLI_FILE = "cli.json"
CLI_FORMAT = "bayes_eval-cli/1"
#: values of ``init --model`` (the model is recorded in the audit's manifest and used by every
#: later command)
CLI_MODELS = ("independent", "pooled", "hierarchical")


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


def _not_utf8(path: Path, exc: UnicodeDecodeError) -> UserError:
    return UserError(
        f"--scores {str(path)!r} is not UTF-8 text (byte {exc.start}); allowed: UTF-8 CSV"
    )


def _load_population(source: dict[str, Any]) -> PopulationLike:
    """Population from the ``population`` block of cli.json."""
    from ..population import Population

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

        from ..parquet import read_parquet  # imported only for Parquet sources (start-up time)

        try:
            with _flags_named(kw, path, csv=False):
                return read_parquet(path, engine=source.get("engine", "memory"), **kw)
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
        raise _not_utf8(path, exc) from None
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
        raise _not_utf8(path, exc) from None
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
    with _flags_named(kw, path, csv=True):
        return Population.from_pandas(frame, **kw)


def _flags_named(kw: dict[str, Any], path: Path, *, csv: bool) -> Any:
    """The population's own validation errors (naming ``scores``, ``predictions``, ``ids``,
    ``threshold``) naming the ``init`` flag as typed and the file; a CSV's 0-based data
    positions also as the file's line numbers (the header is line 1)."""
    flags = {"threshold": "--threshold"}
    for arg, flag, key in (
        ("scores", "--score-col", "score_col"),
        ("predictions", "--prediction-col", "prediction_col"),
        ("ids", "--id-col", "id_col"),
    ):
        if kw.get(key) is not None:
            flags[arg] = f"{flag} {kw[key]!r} of {str(path)!r}"

    def lines(text: str) -> str:
        return re.sub(r"position (\d+)", lambda m: f"line {int(m.group(1)) + 2}", text)

    return flags_for(flags, lines if csv else None)


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


# ------------------------------------------------------------------------------ stored arrays
def _stat(path: Path) -> dict[str, int] | None:
    if not path.is_file():
        return None  # a partitioned Parquet directory: not stored
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _save_cache(audit_dir: Path, meta: dict[str, Any], source: Any) -> None:
    """Write the audit's stored arrays (:mod:`bayes_eval.audit._store`) for later commands.

    ``source`` is the open writer :class:`~bayes_eval.Audit` (its population, strata and seed
    are stored); given only a population, nothing is written now and the first writer command
    stores the arrays. The population file's size, mtime and SHA-256 are recorded with them.
    Any failure to write just means no store (later commands read the population file).
    """
    src = meta["population"]
    source_stat = _stat(Path(src["path"]))
    strata = getattr(source, "strata", None)
    if source_stat is None or strata is None:
        return
    # a read-only or full disk just means no store
    profile = None
    if getattr(source, "model", None) == "pooled":  # its score profile: one O(N) pass, once
        from ..models._profile import score_profile_of

        profile = score_profile_of(strata)
    with contextlib.suppress(OSError):
        extra = {"source": {**source_stat, "sha256": src["sha256"]}}
        means = getattr(source, "score_means", None)
        write_store(audit_dir, source.population, strata, source.seed, extra, means, profile)


def _load_cache(audit_dir: Path, meta: dict[str, Any], *, write: bool) -> Any:
    """The stored population and strata (a :class:`~bayes_eval.audit._store.Store`), or None.

    The population file is trusted unchanged when its size and mtime are those recorded with
    the store; otherwise it is hashed again: a different SHA-256 is an error (the file changed
    since init), the same one just records the new mtime (writers only).
    """
    store = open_store(audit_dir)
    src = meta["population"]
    if store is None or store.population.fingerprint() != src.get("fingerprint"):
        return None
    source_stat = _stat(Path(src["path"]))
    recorded = store.extra.get("source", {})
    if source_stat is None or recorded.get("sha256") != src["sha256"]:
        return None
    if recorded != {**source_stat, "sha256": src["sha256"]}:
        _check_population_file(meta)  # re-hash: raises when the contents changed
        if write:
            update_extra(
                audit_dir, {**store.extra, "source": {**source_stat, "sha256": src["sha256"]}}
            )
    return store


def batch_csv(ids: Any, scores: Any, strata: Any) -> str:
    """The CSV of a batch (columns ``id,score,stratum``; scores as ``%.10g``), as pandas'
    ``DataFrame.to_csv(index=False, float_format="%.10g")`` writes it, without pandas."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "score", "stratum"])
    for i, x, k in zip(ids.tolist(), scores.tolist(), strata.tolist(), strict=True):
        writer.writerow([i, f"{x:.10g}", k])
    return out.getvalue()


# ------------------------------------------------------------------------------ audit access
class _Opened:
    """An audit reopened from its directory, with the CLI settings."""

    def __init__(
        self, path: Path, meta: dict[str, Any], population: PopulationLike, audit: Audit
    ) -> None:
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


def _manifest_model(audit_dir: Path) -> str | None:
    """The model recorded in the audit's manifest (None when it cannot be read; opening the
    audit then reports why)."""
    try:
        manifest = json.loads((audit_dir / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest.get("model") if isinstance(manifest, dict) else None


def _open(audit_dir: Path, *, write: bool = False) -> _Opened:
    """Reopen the audit: ``write=True`` holds the writer lock until the process ends (or
    ``opened.audit.close()``); readers take no lock. A torn ledger line cut on reopening is
    announced on stderr."""
    import bayes_eval as be

    from ..ledger import LedgerRepairWarning

    meta = _read_meta(audit_dir)
    store = _load_cache(audit_dir, meta, write=write)
    pop, strata = (None, None) if store is None else (store.population, store.strata)
    if store is not None and _manifest_model(audit_dir) == "pooled":
        ensure_profile(audit_dir, store, write=write)  # stored, or computed once and stored
    if pop is None:
        _check_population_file(meta)
        pop = _load_population(meta["population"])
        if pop.fingerprint() != meta["population"]["fingerprint"]:
            raise UserError(
                f"population read from {meta['population']['path']!r} has fingerprint "
                f"{pop.fingerprint()[:12]}…, not the {meta['population']['fingerprint'][:12]}… "
                "recorded at init; refusing to continue"
            )
    with warnings.catch_warnings():
        # every repair is said, as one ``warning:`` line (the command boundary's hook, _app)
        warnings.simplefilter("always", LedgerRepairWarning)
        audit = be.Audit.open(audit_dir, pop, strata=strata, read_only=not write)
    if write and store is None:
        _save_cache(audit_dir, meta, audit)
    return _Opened(audit_dir, meta, pop, audit)
