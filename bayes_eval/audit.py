"""The audit loop: propose items, record human labels, estimate, stop — persistently.

An :class:`Audit` ties together a population, its strata, a sequential design, a Beta prior and a
target metric. Each :meth:`Audit.propose` asks the design how to split a batch over the strata
(:mod:`bayes_eval.designs`) and draws that many unproposed items uniformly without replacement
inside each stratum by hash-keyed bottom-k sampling (:mod:`bayes_eval._sampler`). Each
:meth:`Audit.record` validates the labels and, with a ``path``, makes them durable before it
returns (:mod:`bayes_eval.ledger`). :meth:`Audit.estimate` gives the stratified beta-binomial
posterior from the per-stratum counts ``n_k, h_k`` that the audit keeps itself (no pass over the
population), and :meth:`Audit.run` loops until a stopping rule (:mod:`bayes_eval.stop`) or the
budget ends it.

Per batch, the work is O(batch size + K) — independent of the population size N — after a one-off
O(N) set-up (keys of the items of each stratum on first use, and the population fingerprint when
persisting).

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (Figure 1: the sequential
stratified audit with a ±δ stopping rule). Webber et al.,
``../shared/seeds/002_bcc5f0faf615c660.txt`` (beta-binomial posterior, sequential acceptance).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import numbers
import platform
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ._draws import DEFAULT_DRAWS
from ._loop import allocate, design_state, scheduled_batch
from ._sampler import make_sampler
from ._validation import RNGLike, as_generator, check_level, check_option, check_positive_int
from .designs import DESIGNS, DesignState, make_design
from .labels import as_label_values
from .ledger import (
    COUNT_NAME,
    LEDGER_NAME,
    MANIFEST_NAME,
    Ledger,
    LedgerError,
    load_ledger,
    manifest_digest,
    now,
    read_manifest,
    write_json_atomic,
)
from .metrics import METRICS
from .models import DEFAULT_MODEL, design_prior
from .posterior import MODELS, MetricPosterior, estimate_from_stratum_counts
from .priors import NAMED_PRIORS, Prior, resolve_prior
from .stop import Look, Procedure, StopDecision, StopRule, find_certifier

__all__ = ["Audit", "AuditResult"]

#: fields of the manifest that must agree when an existing audit directory is reopened
_IDENTITY_KEYS = (
    "design",
    "metric",
    "model",
    "prior",
    "seed",
    "draws",
    "finite_population",
    "strata",
    "population",
)


@dataclass(frozen=True, slots=True)
class AuditResult:
    """What :meth:`Audit.run` returns.

    Attributes
    ----------
    n_labels : int
        Labels recorded in the audit when it stopped.
    posterior : MetricPosterior
        Posterior after the last batch.
    trajectory : xarray.Dataset
        One entry per look (dimension ``look``): ``n_labels``, ``mean``, ``lower``, ``upper``
        (equal-tailed interval at ``level``), ``half_width``, ``stop``, ``reason`` and the
        per-stratum counts ``n``/``h`` (``look``, ``stratum``).
    certification : Certification or None
        The verdict of the first rule with a ``certification`` method (``be.stop.Accept``);
        None without one.
    stopped_by : str
        ``"budget"``, ``"exhausted"`` (every item labelled) or the stop rule's reason.
    metric, design, model, prior : str
    seed : int
    """

    n_labels: int
    posterior: MetricPosterior
    trajectory: xr.Dataset
    certification: Any
    stopped_by: str
    metric: str
    design: str
    model: str
    prior: str
    seed: int

    def __repr__(self) -> str:
        m = self.metric
        lo, hi = self.posterior.interval(m, prob=0.95, kind="eti")
        cert = "" if self.certification is None else f", certification={self.certification!r}"
        return (
            f"AuditResult({m}={self.posterior.mean(m):.4f} (95% interval {lo:.4f}-{hi:.4f}), "
            f"{self.n_labels} labels, {self.trajectory.sizes.get('look', 0)} looks, stopped by "
            f"{self.stopped_by!r}; design={self.design}, model={self.model}, "
            f"prior={self.prior}, seed={self.seed}{cert})"
        )


def _jsonable(value: Any, name: str) -> Any:
    """Plain JSON data from numpy-bearing options (arrays -> lists)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _jsonable(v, name) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, name) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(
        f"{name} holds {value!r} of type {type(value).__name__}, which cannot be written to the "
        "audit manifest; allowed: numbers, strings, lists, dicts and numpy arrays"
    )


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("bayes-eval", "numpy", "scipy", "pandas", "xarray"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:  # pragma: no cover
            out[pkg] = "unknown"
    return out


def _score_mean(strata: Any) -> np.ndarray | None:
    given = getattr(strata, "score_mean", None)
    if given is not None:
        return np.asarray(given, dtype=np.float64)
    assignment = getattr(strata, "assignment", None)
    pop = getattr(strata, "population", None)
    if isinstance(assignment, np.ndarray) and pop is not None:
        sums = np.bincount(
            assignment.astype(np.int64, copy=False), weights=pop.scores, minlength=strata.n_strata
        )
        return sums / np.asarray(strata.sizes, dtype=np.float64)
    return (np.asarray(strata.score_min) + np.asarray(strata.score_max)) / 2.0


def _strata_info(strata: Any) -> dict[str, Any]:
    assignment = getattr(strata, "assignment", None)
    digest = None
    if isinstance(assignment, np.ndarray):
        digest = hashlib.sha256(
            np.ascontiguousarray(assignment, dtype=np.int32).view(np.uint8)
        ).hexdigest()
    requested = getattr(strata, "requested", None)
    return {
        "method": getattr(strata, "method", "custom"),
        "variable": getattr(strata, "variable", "score"),
        "requested": None if requested is None else list(requested),
        "n_strata": int(strata.n_strata),
        "sizes": np.asarray(strata.sizes).astype(int).tolist(),
        "predicted": np.asarray(strata.predicted).astype(int).tolist(),
        "score_min": np.asarray(strata.score_min, dtype=float).tolist(),
        "score_max": np.asarray(strata.score_max, dtype=float).tolist(),
        "assignment_sha256": digest,
    }


class Audit:
    """A sequential, stratified, persistent audit of a classifier.

    Parameters
    ----------
    population : Population
        The scored items (in memory or Dask-backed).
    strata : Strata
        Strata of ``population`` (:func:`bayes_eval.stratify`).
    metric : str
        Target metric (a key of :data:`bayes_eval.metrics.METRICS`); designs aim at it and stop
        rules watch it. The posterior holds every metric.
    design : str or design object
        A registered design name (``"random"``, ``"proportional"``, ``"equal"``,
        ``"posterior_variance"``, ...) or an object with ``.allocate``.
    prior : "jeffreys", "uniform", (a, b) or per-stratum arrays
        Beta prior of each stratum's positive rate (shown in every result).
    rng : int, Generator or None
        Seed. An int is used as is; a Generator or None draws a 63-bit seed from it. Everything
        random in the audit (allocation, item keys, Monte Carlo draws) derives from this seed, so
        the same seed gives the same proposals.
    path : str or Path, optional
        Audit directory for persistence (see :mod:`bayes_eval.ledger`). A new directory is
        created; an existing one is resumed if its manifest matches these arguments and the
        population (otherwise ``ValueError``).
    model : {"independent", "hierarchical"}
        Posterior model (``"hierarchical"`` needs :mod:`bayes_eval.hierarchical`; its empirical
        Bayes priors also feed the design).
    design_options : dict, optional
        Keyword options of the design factory.
    draws : int
        Monte Carlo draws per posterior (per look in :meth:`run`).
    finite_population : bool
        Metric of the actual population (True) or of the superpopulation.

    Notes
    -----
    *Pending items.* :meth:`propose` always proposes items never proposed before; items proposed
    but not yet labelled stay listed in :attr:`pending` and may be recorded at any time.
    :meth:`run` labels pending items first.

    *Batch sizes.* :meth:`run` asks a design with a ``batch_schedule(round, n_strata)``
    (``"online_optimal"``, ``"opt_a1"``, ``"opt_a2"``) for the size of every batch, and uses
    its ``batch_size`` argument only for designs without one; :meth:`propose` always proposes
    the number it is given.

    *Resuming.* Reopening replays the ledger: every recorded proposal is drawn again from the
    sampler and the design is asked again for its allocation in the state it was made in (which
    rebuilds any state a design keeps between batches, e.g. OPT-A1's frozen weights); both must
    agree with the ledger.

    *Randomness.* The design's generator is ``numpy.random.default_rng(seed)``; its state after
    each batch is saved in the ledger, so a resumed audit continues the same random stream. Item
    keys use ``seed`` (:func:`bayes_eval._sampler.item_keys`). :meth:`estimate` draws from
    ``default_rng([seed, 0xE5, n_labels])`` unless given ``rng``: the same labels give the same
    posterior, and estimating never changes future proposals.

    Examples
    --------
    >>> import numpy as np, bayes_eval as be
    >>> rng = np.random.default_rng(0)
    >>> scores = rng.random(50_000); truth = rng.random(50_000) < scores
    >>> pop = be.Population(scores, threshold=0.5)
    >>> audit = be.Audit(pop, strata=be.stratify(pop, n_strata=4), metric="precision",
    ...                  design="proportional", rng=0)
    >>> res = audit.run(lambda ids: truth[ids], budget=2000, batch_size=100,
    ...                 stop=be.stop.HalfWidth(0.03, rounds=2))
    >>> true_precision = truth[scores >= 0.5].mean()
    >>> error = abs(res.posterior.mean("precision") - true_precision)
    >>> bool(res.n_labels < 2000), bool(error < 0.05)
    (True, True)
    """

    def __init__(
        self,
        population: Any,
        *,
        strata: Any,
        metric: str = "f1",
        design: Any = "posterior_variance",
        prior: Any = "jeffreys",
        rng: RNGLike = None,
        path: str | Path | None = None,
        model: str = DEFAULT_MODEL,
        design_options: dict[str, Any] | None = None,
        draws: int = DEFAULT_DRAWS,
        finite_population: bool = True,
        read_only: bool = False,
    ) -> None:
        for attr in ("sizes", "predicted", "n_strata"):
            if not hasattr(strata, attr):
                raise TypeError(
                    f"strata has type {type(strata).__name__}; allowed: a Strata from "
                    "bayes_eval.stratify"
                )
        if getattr(strata, "population", population) is not population:
            raise ValueError("strata were made from a different population; stratify this one")
        check_option(metric, "metric", tuple(METRICS))
        check_option(model, "model", ("independent", *MODELS))
        self.draws = check_positive_int(draws, "draws")
        if not isinstance(finite_population, bool | np.bool_):
            raise TypeError(f"finite_population={finite_population!r} must be True or False")
        if design_options is not None and not isinstance(design_options, dict):
            raise TypeError(f"design_options={design_options!r} must be a dict or None")
        self.design_options: dict[str, Any] = dict(design_options or {})
        if isinstance(design, str):
            check_option(design, "design", tuple(DESIGNS))
            self.design = make_design(design, **self.design_options)
            self.design_name = design
        else:
            if self.design_options:
                raise ValueError("design_options are only for a design given by name")
            self.design = make_design(design)
            self.design_name = str(getattr(design, "name", type(design).__name__))
        k = int(strata.n_strata)
        self.prior = prior
        self.prior_a, self.prior_b, self.prior_description = resolve_prior(prior, k)
        if isinstance(rng, numbers.Integral) and not isinstance(rng, bool):
            as_generator(rng)  # validates (non-negative)
            self.seed = int(rng)
        else:
            self.seed = int(as_generator(rng).integers(0, 2**63))
        self.population = population
        self.strata = strata
        self.metric = metric
        self.model = model
        self.finite_population = bool(finite_population)
        self.path: Path | None = None if path is None else Path(path)
        self.budget: int | None = None
        self.batch_size: int | None = None
        self.looks = 0
        self.repaired_torn_line = False
        self.read_only = bool(read_only)
        self._lock: Any = None

        self._sizes = np.asarray(strata.sizes, dtype=np.int64)
        self._predicted = np.asarray(strata.predicted, dtype=bool)
        self._score_mean = _score_mean(strata)
        self._n = np.zeros(k, dtype=np.int64)
        self._h = np.zeros(k, dtype=np.int64)
        self._drawn = np.zeros(k, dtype=np.int64)
        self._round = 0
        self._proposed: dict[Any, int] = {}  # id -> stratum
        self._labels: dict[Any, int] = {}  # id -> 0/1, in recording order
        self._pending: dict[Any, None] = {}  # ordered set of proposed, unlabelled ids
        self._look_records: list[dict[str, Any]] = []
        self._rng = np.random.default_rng(self.seed)
        self._sampler = make_sampler(strata, self.seed)
        probe = population.ids_at(np.zeros(1, dtype=np.int64))
        self._id_dtype = np.asarray(probe).dtype
        self._id_kind = "int" if np.issubdtype(self._id_dtype, np.integer) else "str"
        self._ledger: Ledger | None = None
        self._broken: str | None = None
        if self.path is not None:
            self._open_path()

    # ------------------------------------------------------------------ persistence
    def _manifest(self) -> dict[str, Any]:
        prior = (
            self.prior
            if isinstance(self.prior, str)
            else {"a": self.prior_a.tolist(), "b": self.prior_b.tolist()}
        )
        return {
            "format": "bayes_eval-audit",
            "version": 1,
            "created_at": now(),
            "design": {
                "name": self.design_name,
                "options": _jsonable(self.design_options, "design_options"),
            },
            "metric": self.metric,
            "model": self.model,
            "prior": prior,
            "prior_description": self.prior_description,
            "seed": self.seed,
            "draws": self.draws,
            "finite_population": self.finite_population,
            "strata": _strata_info(self.strata),
            "population": {
                "size": int(self.population.size),
                "fingerprint": self.population.fingerprint(),
                "threshold": self.population.threshold,
                "id_kind": self._id_kind,
            },
            "versions": _versions(),
        }

    def _open_path(self) -> None:
        """Lock the directory (writers), then create the audit or check and replay its ledger.

        A new audit writes the ledger (header with the manifest's digest) before the manifest, so
        a directory with a manifest always has its ledger; a leftover ledger with only its header
        and no manifest is an interrupted creation and is started again.
        """
        from ._lock import LOCK_NAME, lock_for_writer

        assert self.path is not None
        path = self.path
        if path.exists() and not path.is_dir():
            raise ValueError(f"path={str(path)!r} exists and is not a directory")
        mine = json.loads(json.dumps(self._manifest()))
        manifest_file = path / MANIFEST_NAME
        ledger_file = path / LEDGER_NAME
        if self.read_only:
            if not manifest_file.exists():
                raise LedgerError(f"{str(path)!r} has no {MANIFEST_NAME}; not an audit directory")
        else:
            if not manifest_file.exists():
                path.mkdir(parents=True, exist_ok=True)
            self._lock = lock_for_writer(path, self, Audit._superseded)
        try:
            self._open_locked(path, mine, manifest_file, ledger_file, LOCK_NAME)
        except BaseException:
            self.close()
            raise

    def _open_locked(
        self, path: Path, mine: dict[str, Any], manifest_file: Path, ledger_file: Path, lock: str
    ) -> None:
        if manifest_file.exists():
            stored = read_manifest(path)
            diff = [key for key in _IDENTITY_KEYS if stored.get(key) != mine.get(key)]
            if diff:
                details = "; ".join(
                    f"{key}: stored {_short(stored.get(key))}, given {_short(mine.get(key))}"
                    for key in diff
                )
                raise ValueError(
                    f"path={str(path)!r} holds an audit that does not match these arguments or "
                    f"this population ({details}); use Audit.open(path, population) to resume "
                    "it, or a new path"
                )
            digest = manifest_digest(stored)
            if self.read_only:
                records, torn = load_ledger(ledger_file)
            else:
                self._ledger, records, torn = Ledger.open(ledger_file)
            if records[0].get("manifest_sha256") != digest:
                raise LedgerError(f"ledger {str(ledger_file)!r} belongs to a different manifest")
            self.repaired_torn_line = torn and not self.read_only
            self._replay(records[1:])
            return
        leftovers = {p.name for p in path.iterdir()} - {lock}
        if leftovers <= {LEDGER_NAME, COUNT_NAME} and LEDGER_NAME in leftovers:
            try:
                records, _ = load_ledger(ledger_file)
            except LedgerError:
                records = []
            if len(records) == 1 and records[0].get("type") == "header":
                ledger_file.unlink()  # interrupted creation: nothing was ever acknowledged
                (path / COUNT_NAME).unlink(missing_ok=True)
                leftovers = set()
        if leftovers:
            raise ValueError(
                f"path={str(path)!r} is a non-empty directory without {MANIFEST_NAME} "
                f"(holds {sorted(leftovers)[:5]}); allowed: a new or empty directory, or an "
                "existing audit directory"
            )
        self._ledger = Ledger.create(ledger_file, {"manifest_sha256": manifest_digest(mine)})
        write_json_atomic(manifest_file, mine)

    def close(self) -> None:
        """Close the ledger and release the writer lock (idempotent; the object stays readable).

        Appending afterwards is an error; a closed audit can be reopened with
        :meth:`Audit.open`. Also used as a context manager: ``with Audit.open(...) as audit:``.
        """
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None
            if self._broken is None:
                self._broken = "it was closed"
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _superseded(self) -> None:
        self.close()
        self._broken = "a newer Audit on the same directory was opened in this process"

    def __enter__(self) -> Audit:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def _replay(self, records: list[dict[str, Any]]) -> None:
        """Rebuild the state from ledger records (and check them against the sampler)."""
        for i, rec in enumerate(records, start=2):
            kind = rec.get("type")
            if kind == "propose":
                counts = np.asarray(rec["counts"], dtype=np.int64)
                ids = rec["ids"]
                if counts.shape != self._sizes.shape or int(counts.sum()) != len(ids):
                    raise LedgerError(f"ledger line {i}: malformed proposal record")
                start = 0
                for kk in np.flatnonzero(counts):
                    got = self._sampler.draw(int(kk), int(counts[kk]))
                    want = ids[start : start + int(counts[kk])]
                    if [self._canon_one(v) for v in got.tolist()] != want:
                        raise LedgerError(
                            f"ledger line {i}: the proposals recorded for stratum {kk} differ "
                            "from what this population and seed produce; the ledger does not "
                            "belong to this population"
                        )
                    start += int(counts[kk])
                    for v in want:
                        self._proposed[v] = int(kk)
                        self._pending[v] = None
                self._replay_allocation(i, counts)
                self._drawn += counts
                self._round += 1
                self._rng.bit_generator.state = rec["rng"]
            elif kind == "label":
                key, y = rec["id"], int(rec["label"])
                if key not in self._proposed:
                    raise LedgerError(f"ledger line {i}: label for id {key!r} never proposed")
                old = self._labels.get(key)
                if old is not None:
                    if old != y:
                        raise LedgerError(f"ledger line {i}: conflicting label for id {key!r}")
                    continue
                self._apply_label(key, y)
            elif kind == "look":
                self.looks += 1
                self._look_records.append(rec)
            else:
                raise LedgerError(f"ledger line {i}: unknown record type {kind!r}")

    def _replay_allocation(self, line: int, counts: np.ndarray) -> None:
        """Ask the design again for a recorded batch, in the state it was first asked in.

        Designs may keep state between batches (OPT-A1 freezes its standard deviations after
        the initial sample); calling ``allocate`` on every replayed proposal, with the same
        counts, availability, round and generator state, rebuilds that state, so a resumed audit
        proposes exactly what an uninterrupted one would. The answer must be the recorded
        allocation; a different one means the design does not reproduce the ledger.
        """
        n = int(counts.sum())
        if n == 0:
            return
        state = self.design_state()  # counts, availability and round as at the time
        again = np.asarray(self.design.allocate(state, n, self._rng), dtype=np.int64)
        if again.shape != counts.shape or not np.array_equal(again, counts):
            raise LedgerError(
                f"ledger line {line}: design {self.design_name!r} now allocates "
                f"{again.tolist()} where the ledger records {counts.tolist()}; the ledger was "
                "written by a different version of the design or with other options"
            )

    def _persist(self, records: list[dict[str, Any]]) -> None:
        if self._ledger is None:
            return
        try:
            self._ledger.append(records)
        except BaseException as exc:
            self._broken = f"writing the ledger failed ({exc!r})"
            raise

    def _check_usable(self) -> None:
        if self.read_only:
            raise RuntimeError(
                "this Audit was opened with read_only=True; reopen it with "
                "Audit.open(path, population) to propose or record"
            )
        if self._broken is not None:
            raise RuntimeError(
                f"this Audit object is unusable: {self._broken}; reopen it with "
                "Audit.open(path, population)"
            )

    @classmethod
    def open(
        cls,
        path: str | Path,
        population: Any,
        *,
        strata: Any = None,
        design: Any = None,
        read_only: bool = False,
    ) -> Audit:
        """Resume the audit stored in ``path`` on ``population``.

        Parameters
        ----------
        path : str or Path
            An audit directory written by ``Audit(..., path=...)``.
        population : Population
            The same population (checked by size and fingerprint).
        strata : Strata, optional
            The audit's strata. Default: re-made with ``stratify`` from the method and settings in
            the manifest and checked against its sizes, edges and assignment digest (randomised
            or custom strata must be passed).
        design : design object, optional
            Needed only when the audit was created with a design object rather than a name.
        read_only : bool, default False
            Open without the writer lock, for reading (``estimate``, ``labels``, reports) while
            another process may be writing; ``propose``/``record``/``run`` are refused. A torn
            last line is ignored, not cut. Otherwise the directory's writer lock is held until
            :meth:`close` (or the end of a ``with`` block, or the object's deletion), and a
            second writer gets :class:`~bayes_eval._lock.AuditLockedError` naming the holder.

        Returns
        -------
        Audit
            In exactly the state after its last acknowledged call: same labels, same pending items,
            same future proposals.
        """
        manifest = read_manifest(path)
        pinfo = manifest["population"]
        if int(pinfo["size"]) != int(population.size) or pinfo["fingerprint"] != (
            population.fingerprint()
        ):
            raise ValueError(
                f"population does not match the audit in {str(path)!r} (stored size "
                f"{pinfo['size']}, fingerprint {pinfo['fingerprint'][:12]}...; given size "
                f"{population.size}, fingerprint {population.fingerprint()[:12]}...)"
            )
        sinfo = manifest["strata"]
        if strata is None:
            if sinfo["method"] == "custom" or sinfo["requested"] is None:
                raise ValueError(
                    f"the audit in {str(path)!r} uses custom strata; pass strata= to open it"
                )
            from .strata import stratify

            requested = sinfo["requested"]
            strata = stratify(
                population,
                method=sinfo["method"],
                n_strata=tuple(requested),
                variable=sinfo["variable"],
            )
            if _strata_info(strata) != sinfo:
                raise ValueError(
                    f"re-stratifying with method={sinfo['method']!r} does not reproduce the "
                    f"strata stored in {str(path)!r} (a randomised stratifier?); pass strata="
                )
        dinfo = manifest["design"]
        if design is None:
            if dinfo["name"] not in DESIGNS:
                raise ValueError(
                    f"the audit in {str(path)!r} used design {dinfo['name']!r}, which is not a "
                    "registered design; pass design= (the same design object)"
                )
            design, options = dinfo["name"], dinfo["options"]
        else:
            options = None
        prior = manifest["prior"]
        if isinstance(prior, dict):
            prior = (np.asarray(prior["a"], dtype=float), np.asarray(prior["b"], dtype=float))
        elif prior not in NAMED_PRIORS:  # pragma: no cover - written by us
            raise LedgerError(f"manifest prior {prior!r} is not understood")
        return cls(
            population,
            strata=strata,
            metric=manifest["metric"],
            design=design,
            design_options=options,
            prior=prior,
            rng=int(manifest["seed"]),
            path=path,
            model=manifest["model"],
            draws=int(manifest["draws"]),
            finite_population=bool(manifest["finite_population"]),
            read_only=read_only,
        )

    # ------------------------------------------------------------------ ids
    def _canon_one(self, v: Any) -> Any:
        return int(v) if self._id_kind == "int" else str(v)

    def _canon(self, ids: Any, name: str = "ids") -> list[Any]:
        arr = np.asarray(ids)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        if arr.ndim != 1:
            raise ValueError(f"{name} has shape {arr.shape}; allowed: a 1-D sequence of ids")
        if arr.size == 0:
            return []
        if self._id_kind == "int":
            if arr.dtype == object:
                bad = [
                    v
                    for v in arr.tolist()
                    if isinstance(v, bool) or not isinstance(v, numbers.Integral)
                ]
                if bad:
                    raise TypeError(f"{name} contains {bad[0]!r}; this population has integer ids")
                return [int(v) for v in arr.tolist()]
            if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
                raise TypeError(
                    f"{name} contains {arr.tolist()[0]!r} (dtype {arr.dtype}); this population "
                    "has integer ids"
                )
            if arr.dtype == np.uint64:  # never wrap ids above 2**63 - 1 to negative ones
                return [int(v) for v in arr.tolist()]
            return arr.astype(np.int64).tolist()
        if arr.dtype == object:
            bad = [v for v in arr.tolist() if not isinstance(v, str)]
            if bad:
                raise TypeError(f"{name} contains {bad[0]!r}; this population has string ids")
        elif not np.issubdtype(arr.dtype, np.str_):
            raise TypeError(
                f"{name} contains {arr.tolist()[0]!r} (dtype {arr.dtype}); this population has "
                "string ids"
            )
        return [str(v) for v in arr.tolist()]

    def _as_id_array(self, keys: list[Any]) -> np.ndarray:
        if self._id_kind == "int":
            return np.asarray(keys, dtype=np.int64)
        return np.asarray(keys, dtype=str) if keys else np.empty(0, dtype=self._id_dtype)

    # ------------------------------------------------------------------ state
    @property
    def n_labels(self) -> int:
        """Labels recorded so far."""
        return int(self._n.sum())

    @property
    def n_proposed(self) -> int:
        """Items proposed so far (labelled or pending)."""
        return int(self._drawn.sum())

    @property
    def pending(self) -> np.ndarray:
        """Ids proposed but not yet labelled, in proposal order."""
        return self._as_id_array(list(self._pending))

    @property
    def rounds(self) -> int:
        """Proposal batches made so far."""
        return self._round

    def counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-stratum labels ``n_k`` and positives ``h_k`` (copies)."""
        return self._n.copy(), self._h.copy()

    def labels(self) -> pd.Series:
        """Recorded labels as a Series indexed by id (recording order), values 0/1."""
        keys = list(self._labels)
        return pd.Series(
            np.fromiter(self._labels.values(), dtype=np.uint8, count=len(keys)),
            index=pd.Index(self._as_id_array(keys), name="id"),
            name="label",
        )

    def design_state(self) -> DesignState:
        """The :class:`~bayes_eval.designs.DesignState` the next proposal will use."""
        pa, pb = design_prior(
            self.model, self.strata, self._n, self._h, self.prior_a, self.prior_b, self._score_mean
        )
        return design_state(
            sizes=self._sizes,
            predicted=self._predicted,
            n=self._n,
            h=self._h,
            available=self._sizes - self._drawn,
            prior_a=pa,
            prior_b=pb,
            metric=self.metric,
            round=self._round,
            score_mean=self._score_mean,
            finite_population=self.finite_population,
        )

    def _apply_label(self, key: Any, y: int) -> None:
        k = self._proposed[key]
        self._labels[key] = y
        self._pending.pop(key, None)
        self._n[k] += 1
        self._h[k] += y

    # ------------------------------------------------------------------ the three verbs
    def propose(self, n: int) -> np.ndarray:
        """Choose the next ``n`` items to label.

        The design splits ``n`` over the strata; inside each stratum the items come in the audit's
        key order (a uniform sample without replacement). Items are never proposed twice; earlier
        proposals still unlabelled stay in :attr:`pending`. With a ``path`` the proposal is in the
        ledger before this returns.

        Parameters
        ----------
        n : int
            Items wanted, at least 1 and at most the items never proposed. Always ``n``, also
            for a design with a ``batch_schedule`` (only :meth:`run` follows the schedule).

        Returns
        -------
        ndarray
            Ids, grouped by stratum.
        """
        self._check_usable()
        n = check_positive_int(n, "n")
        avail = self._sizes - self._drawn
        left = int(avail.sum())
        if n > left:
            raise ValueError(f"n={n} is more than the {left} items never proposed")
        try:
            counts = allocate(self.design, self.design_state(), n, self._rng)
        except RuntimeError:
            self._broken = f"design {self.design_name!r} returned an invalid allocation"
            raise
        parts, strata_of = [], []
        for kk in np.flatnonzero(counts):
            got = self._sampler.draw(int(kk), int(counts[kk]))
            parts.append(np.asarray(got))
            strata_of.append(np.full(len(got), kk))
        ids = np.concatenate(parts) if parts else self._as_id_array([])
        keys = [self._canon_one(v) for v in ids.tolist()]
        self._persist(
            [
                {
                    "type": "propose",
                    "round": self._round,
                    "counts": counts.tolist(),
                    "ids": keys,
                    "rng": self._rng.bit_generator.state,
                    "at": now(),
                }
            ]
        )
        for key, kk in zip(keys, np.concatenate(strata_of).tolist(), strict=True):
            self._proposed[key] = int(kk)
            self._pending[key] = None
        self._drawn += counts
        self._round += 1
        return self._as_id_array(keys)

    def record(self, ids: Any, labels: Any) -> int:
        """Record human labels of proposed items.

        Everything is validated before anything is written: ids must have been proposed (an
        unknown id and an id never proposed are distinct errors), labels must be 0/1 or bool,
        lengths must match, and an id may not get two different labels (in this call or against
        an earlier one). Re-recording an identical label is a no-op. With a ``path``, the labels
        are in the ledger (flushed and fsync'd) before this returns.

        Parameters
        ----------
        ids : sequence of ids
        labels : sequence of 0/1 or bool, same length

        Returns
        -------
        int
            Number of new labels recorded.
        """
        self._check_usable()
        keys = self._canon(ids, "ids")
        values = as_label_values(
            np.asarray(labels).reshape(-1) if np.ndim(labels) == 0 else labels, "labels"
        )
        if values.shape[0] != len(keys):
            raise ValueError(
                f"ids has {len(keys)} entries but labels has {values.shape[0]}; they must match"
            )
        given: dict[Any, int] = {}
        for key, y in zip(keys, values.tolist(), strict=True):
            old = given.setdefault(key, y)
            if old != y:
                raise ValueError(f"ids gives id {key!r} two different labels (0 and 1)")
        not_proposed = [key for key in given if key not in self._proposed]
        if not_proposed:
            probe = self._as_id_array(not_proposed)
            try:
                self.population.positions_of(probe, name="ids")
            except ValueError as exc:
                raise ValueError(f"ids contains an id not in the population: {exc}") from None
            raise ValueError(
                f"ids contains {len(not_proposed)} id(s) never proposed by this audit (first: "
                f"{not_proposed[0]!r}); only items from propose() can be recorded"
            )
        new: list[tuple[Any, int]] = []
        for key, y in given.items():
            old = self._labels.get(key)
            if old is None:
                new.append((key, y))
            elif old != y:
                raise ValueError(
                    f"id {key!r} already has label {old}; the new label {y} conflicts with it"
                )
        if not new:
            return 0
        stamp = now()
        self._persist([{"type": "label", "id": key, "label": y, "at": stamp} for key, y in new])
        for key, y in new:
            self._apply_label(key, y)
        return len(new)

    def estimate(
        self,
        *,
        draws: int | None = None,
        rng: RNGLike = None,
        metrics: str | tuple[str, ...] | None = None,
    ) -> MetricPosterior:
        """Posterior of the metrics from the labels recorded so far (no pass over the population).

        Parameters
        ----------
        draws : int, optional
            Monte Carlo draws (default: the audit's ``draws``).
        rng : int, Generator or None
            Default ``default_rng([seed, 0xE5, n_labels])``: reproducible, and independent of the
            proposal stream.
        metrics : str or tuple of str, optional
        """
        gen = (
            np.random.default_rng([self.seed, 0xE5, self.n_labels])
            if rng is None
            else as_generator(rng)
        )
        return estimate_from_stratum_counts(
            self.strata,
            self._n,
            self._h,
            prior=Prior(self.prior_a, self.prior_b, self.prior_description),
            finite_population=self.finite_population,
            draws=self.draws if draws is None else check_positive_int(draws, "draws"),
            rng=gen,
            metrics=metrics,
            model=self.model,
        )

    @property
    def look_model(self) -> str:
        """Posterior used at the looks of :meth:`run` (see there)."""
        if self.model != "hierarchical":
            return self.model  # the looks use the model itself (it is fast)
        return "independent with empirical-Bayes priors (hierarchical approximation)"

    def _look_posterior(self) -> MetricPosterior:
        if self.model != "hierarchical":
            return self.estimate()
        state = self.design_state()  # carries the empirical-Bayes priors
        return estimate_from_stratum_counts(
            self.strata,
            self._n,
            self._h,
            prior=Prior(
                state.prior_a,
                state.prior_b,
                f"empirical-bayes ({self.model} approximation, base {self.prior_description})",
            ),
            finite_population=self.finite_population,
            draws=self.draws,
            rng=np.random.default_rng([self.seed, 0xE5, self.n_labels]),
            model="independent",
        )

    # ------------------------------------------------------------------ the loop
    def run(
        self,
        oracle: Callable[[np.ndarray], Any],
        *,
        budget: int,
        batch_size: int | None = None,
        stop: StopRule | None = None,
        level: float = 0.95,
        final_posterior: bool = True,
    ) -> AuditResult:
        """Propose, label with ``oracle``, record and look, until ``stop`` or the budget ends it.

        The size of batch ``r`` (``r`` counts every batch of the audit, also those proposed
        before this call or before a resume) is

        .. math::

            m_r = \\min(B_r,\\; \\mathrm{budget} - n_{\\mathrm{labels}}
                  - n_{\\mathrm{pending}},\\; N - n_{\\mathrm{proposed}}),

        where :math:`B_r` is ``design.batch_schedule(r, K)`` when the design has a batch
        schedule (``"online_optimal"``: :math:`D_0` then :math:`D`; ``"opt_a1"``/``"opt_a2"``:
        the initial sample ``K n_ini`` then ``n_step``), and ``batch_size`` otherwise. A
        schedule is part of the design as published, so it overrides ``batch_size``;
        :meth:`propose` always proposes the ``n`` it is asked for. Since the round number is in
        the ledger, a resumed audit continues the schedule where it stopped.

        Parameters
        ----------
        oracle : callable ids -> labels
            Returns the 0/1 labels of the given ids (people, or known truth in simulations).
        budget : int
            Maximum total labels of the audit (labels recorded before this call count).
        batch_size : int, optional
            Labels per batch; the stop rule looks after every batch. Required unless the design
            has a ``batch_schedule``, which then sets the batch sizes instead (see above).
        stop : StopRule, optional
            E.g. ``be.stop.HalfWidth(0.01, level=0.95, rounds=2) | be.stop.Budget(3000)``.
        level : float
            Level of the equal-tailed interval recorded in the trajectory.
        final_posterior : bool
            Only for ``model="hierarchical"``: the looks use the fast approximation (independent
            Beta posteriors under the empirical-Bayes priors of
            :func:`bayes_eval.hierarchical.empirical_bayes_prior`, :attr:`look_model`), and with
            ``True`` the result's posterior is the full hierarchical fit (NUTS; slow) after the
            last look; with ``False`` it is the last look's approximation.

        Returns
        -------
        AuditResult
        """
        self._check_usable()
        if not callable(oracle):
            raise TypeError(f"oracle={oracle!r} must be callable: ids -> 0/1 labels")
        budget = check_positive_int(budget, "budget")
        if batch_size is not None:
            batch_size = check_positive_int(batch_size, "batch_size")
        level = check_level(level, "level")
        if stop is not None and not isinstance(stop, StopRule):
            raise TypeError(f"stop={stop!r} has type {type(stop).__name__}; allowed: a StopRule")
        k = int(self._sizes.shape[0])
        scheduled_batch(self.design, self._round, k, batch_size)  # refuses a missing batch_size
        if getattr(self.design, "batch_schedule", None) is not None:
            # stop rules read the (steady-state) batch size
            batch_size = scheduled_batch(self.design, max(self._round, 1), k, batch_size)
        self.budget, self.batch_size = budget, batch_size
        procedure = self.procedure(budget=budget, batch_size=batch_size)
        if stop is not None:
            stop.prepare(procedure)
        if self._pending:
            ids = self.pending
            self.record(ids, oracle(ids))
        rows: list[dict[str, Any]] = []
        post: MetricPosterior | None = None
        stopped_by = ""
        total = int(self._sizes.sum())
        lo_q, hi_q = (1 - level) / 2, (1 + level) / 2
        while True:
            room = budget - self.n_labels - len(self._pending)
            left = total - self.n_proposed
            m = min(self._next_batch_size(batch_size), room, left)
            if m <= 0:
                stopped_by = "budget" if room <= 0 else "exhausted"
                break
            ids = self.propose(m)
            self.record(ids, oracle(ids))
            post = self._look_posterior()
            self.looks += 1
            look = Look(procedure, self.n_labels, self.looks)
            decision = stop.check(look, post) if stop is not None else StopDecision(False)
            x = post.draws(self.metric)
            lo, hi = np.quantile(x, [lo_q, hi_q])
            row = {
                "type": "look",
                "look": self.looks,
                "n_labels": self.n_labels,
                "mean": float(x.mean()),
                "lower": float(lo),
                "upper": float(hi),
                "stop": bool(decision.stop),
                "reason": decision.reason,
            }
            self._persist([row])
            self._look_records.append(row)
            rows.append({**row, "n": self._n.copy(), "h": self._h.copy()})
            if decision.stop:
                stopped_by = decision.reason or repr(stop)
                break
        if post is None or (self.model == "hierarchical" and final_posterior):
            post = self.estimate() if final_posterior else self._look_posterior()
        certifier = find_certifier(stop)
        cert = None
        if certifier is not None:
            final = Look(procedure, self.n_labels, max(self.looks, 1))
            cert = certifier.certification(final, post)  # type: ignore[attr-defined]
        return AuditResult(
            n_labels=self.n_labels,
            posterior=post,
            trajectory=self._trajectory(rows, level, stop),
            certification=cert,
            stopped_by=stopped_by,
            metric=self.metric,
            design=self.design_name,
            model=self.model,
            prior=self.prior_description,
            seed=self.seed,
        )

    def procedure(self, *, budget: int | None = None, batch_size: int | None = None) -> Procedure:
        """The :class:`~bayes_eval.stop.Procedure` this audit runs (what stop rules see and a
        sequential calibration simulates), with the labels so far as the pilot."""
        return Procedure(
            strata=self.strata,
            metric=self.metric,
            design=self.design_name,
            design_options=dict(self.design_options),
            model=self.model,
            prior=Prior(self.prior_a, self.prior_b, self.prior_description),
            finite_population=self.finite_population,
            draws=self.draws,
            batch_size=batch_size,
            budget=budget,
            seed=self.seed,
            path=self.path,
            pilot_n=self._n.copy(),
            pilot_h=self._h.copy(),
        )

    def _next_batch_size(self, batch_size: int | None) -> int:
        """The size of the next batch (:func:`bayes_eval._loop.scheduled_batch`)."""
        try:
            return scheduled_batch(self.design, self._round, int(self._sizes.shape[0]), batch_size)
        except RuntimeError:
            self._broken = f"design {self.design_name!r} returned an invalid batch size"
            raise

    def _trajectory(
        self, rows: list[dict[str, Any]], level: float, stop: StopRule | None
    ) -> xr.Dataset:
        k = self._sizes.shape[0]
        col = {
            name: [r[name] for r in rows]
            for name in ("look", "n_labels", "mean", "lower", "upper", "stop", "reason")
        }
        lower = np.asarray(col["lower"], dtype=float)
        upper = np.asarray(col["upper"], dtype=float)
        return xr.Dataset(
            {
                "n_labels": ("look", np.asarray(col["n_labels"], dtype=np.int64)),
                "mean": ("look", np.asarray(col["mean"], dtype=float)),
                "lower": ("look", lower),
                "upper": ("look", upper),
                "half_width": ("look", (upper - lower) / 2),
                "stop": ("look", np.asarray(col["stop"], dtype=bool)),
                "reason": ("look", np.asarray(col["reason"], dtype=str)),
                "n": (
                    ("look", "stratum"),
                    np.asarray([r["n"] for r in rows], dtype=np.int64).reshape(-1, k),
                ),
                "h": (
                    ("look", "stratum"),
                    np.asarray([r["h"] for r in rows], dtype=np.int64).reshape(-1, k),
                ),
            },
            coords={"look": np.asarray(col["look"], dtype=np.int64), "stratum": np.arange(k)},
            attrs={
                "metric": self.metric,
                "design": self.design_name,
                "level": level,
                "interval": "equal-tailed",
                "prior": self.prior_description,
                "model": self.model,
                "look_model": self.look_model,
                "seed": self.seed,
                "stop": "none" if stop is None else repr(stop),
            },
        )

    def __repr__(self) -> str:
        where = f", path={str(self.path)!r}" if self.path is not None else ""
        return (
            f"Audit(metric={self.metric!r}, design={self.design_name!r}, "
            f"prior={self.prior_description}, model={self.model!r}, seed={self.seed}, "
            f"K={self._sizes.shape[0]}, {self.n_labels} labels, {len(self._pending)} pending, "
            f"{self._round} batches{where})"
        )


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
