"""The audit object: propose items, record human labels, estimate, stop — persistently.

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
persisting); with stored strata (:mod:`bayes_eval.audit._store`) there is no O(N) step at all.
An audit with a ``path`` also keeps its pre-registered :class:`~bayes_eval.audit.Claim` and the
logged :class:`~bayes_eval.audit.LookRecord` s in its ledger.

Imports: the posterior (xarray, scipy), the stop rules, pandas and the loop of
:mod:`bayes_eval.audit._run` are imported on first use by :meth:`Audit.estimate`,
:meth:`Audit.labels` and :meth:`Audit.run`, so that proposing and recording (the command line's
``next`` and ``record``) load none of them (issue 16: <= 1 s per command on 10^7 items).

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (Figure 1: the sequential
stratified audit with a ±δ stopping rule). Webber et al.,
``../shared/seeds/002_bcc5f0faf615c660.txt`` (beta-binomial posterior, sequential acceptance).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from .._draws import DEFAULT_DRAWS, audit_generator
from .._loop import allocate, design_state
from .._procedure import Procedure
from .._protocols import PopulationLike, StrataLike, check_strata, score_mean
from .._sampler import make_sampler
from .._validation import RNGLike, as_generator, check_bool, check_option, check_positive_int
from ..designs import Design, DesignState
from ..labels import canonical_ids, new_labels
from ..ledger import manifest_digest, now, read_manifest
from ..metrics import METRICS, metrics_for_sides
from ..models import DEFAULT_MODEL, MODELS, check_model_prior, design_prior, prior_label
from ..priors import BetaSpec, Prior, resolve_prior
from ._directory import AuditDirectory, label_lines, proposal_line, replay
from ._manifest import audit_seed, build_manifest, check_design, open_arguments
from ._memo import PriorMemo
from ._records import Claim, LookRecord, event_record

if TYPE_CHECKING:
    import pandas as pd

    from ..posterior import MetricPosterior
    from ..stop import StopRule
    from ._run import AuditResult

__all__ = ["Audit"]


class Audit:
    """A sequential, stratified, persistent audit of a classifier.

    Parameters
    ----------
    population : Population
        The scored items (in memory or Dask-backed).
    strata : Strata
        Strata of ``population`` (:func:`bayes_eval.stratify`), or strata read back from an
        audit directory's stored arrays (``bayes_eval.audit._store``).
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
    model : {"pooled", "independent", "hierarchical"}
        Posterior model, default :data:`bayes_eval.models.DEFAULT_MODEL` (``"pooled"``: the
        score-informed pooled model of :mod:`bayes_eval.models.pooled`; ``"independent"``:
        independent Beta priors per stratum, ``prior``; ``"hierarchical"`` needs
        :mod:`bayes_eval.hierarchical`). The model also feeds the design
        (:func:`bayes_eval.models.design_prior`; pooled: each stratum's rate on the fitted curve).
    design_options : dict, optional
        Keyword options of the design factory.
    draws : int
        Monte Carlo draws per posterior (per look in :meth:`run`).
    finite_population : bool
        Metric of the actual population (True) or of the superpopulation.
    read_only : bool
        Only with ``path``: open an existing audit without the writer lock (see :meth:`open`).

    Notes
    -----
    *Pending items.* :meth:`propose` always proposes items never proposed before; items proposed
    but not yet labelled stay listed in :attr:`pending` and may be recorded at any time.
    :meth:`run` labels pending items first, and follows a design's ``batch_schedule`` (see
    there); :meth:`propose` always proposes the number it is given.

    *Resuming.* Reopening replays the ledger: every recorded proposal is drawn again and the
    design is asked again for its allocation in the state it was made in; both must agree with
    the ledger (:func:`bayes_eval.audit._directory.replay`).

    *Randomness.* The design's generator is ``numpy.random.default_rng(seed)``, its state saved
    in the ledger after each batch; item keys use ``seed`` (:func:`bayes_eval._sampler.item_keys`);
    :meth:`estimate` draws from ``default_rng([seed, 0xE5, n_labels])`` unless given ``rng``, so
    estimating never changes future proposals.

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
        population: PopulationLike,
        *,
        strata: StrataLike,
        metric: str = "f1",
        design: str | Design = "posterior_variance",
        prior: BetaSpec = "jeffreys",
        rng: RNGLike = None,
        path: str | Path | None = None,
        model: str = DEFAULT_MODEL,
        design_options: dict[str, Any] | None = None,
        draws: int = DEFAULT_DRAWS,
        finite_population: bool = True,
        read_only: bool = False,
    ) -> None:
        check_strata(strata, population)
        check_option(metric, "metric", tuple(METRICS))
        # refused here (precision with nothing predicted positive), as ``estimate`` does
        metrics_for_sides(metric, strata.sizes, strata.predicted)
        check_option(model, "model", ("independent", *MODELS))
        self.draws = check_positive_int(draws, "draws")
        check_bool(finite_population, "finite_population")
        checked = check_design(design, design_options)
        self.design, self.design_name = checked.design, checked.name
        self.design_options: dict[str, Any] = dict(checked.options)
        self.prior = prior
        k = int(strata.n_strata)
        self.prior_a, self.prior_b, self.prior_description = resolve_prior(prior, k)
        check_model_prior(model, self.prior_description)
        self.seed = audit_seed(rng)
        self.population = population
        self.strata = strata
        self.metric = metric
        self.model = model
        self.finite_population = bool(finite_population)
        self.path: Path | None = None if path is None else Path(path)
        self.budget: int | None = None
        self.batch_size: int | None = None
        self.looks = 0
        self.read_only = bool(read_only)

        self._sizes = np.asarray(strata.sizes, dtype=np.int64)
        self._predicted = np.asarray(strata.predicted, dtype=bool)
        self._score_mean = score_mean(strata)
        self._n = np.zeros(k, dtype=np.int64)
        self._h = np.zeros(k, dtype=np.int64)
        self._drawn = np.zeros(k, dtype=np.int64)
        self._round = 0
        # the design's memory between batches (DesignState.memory); a replayed ledger rebuilds it
        self._design_memory: dict[str, np.ndarray] = {}
        self._proposed: dict[Any, int] = {}  # id -> stratum
        self._labels: dict[Any, int] = {}  # id -> 0/1, in recording order
        self._pending: dict[Any, None] = {}  # ordered set of proposed, unlabelled ids
        self._look_records: list[dict[str, Any]] = []
        self._claim: Claim | None = None
        self._looks_logged: list[LookRecord] = []
        self._rng = np.random.default_rng(self.seed)
        self._sampler = make_sampler(strata, self.seed)
        probe = population.ids_at(np.zeros(1, dtype=np.int64))
        self._id_dtype = np.asarray(probe).dtype
        self.id_kind = "int" if np.issubdtype(self._id_dtype, np.integer) else "str"
        self._dir: AuditDirectory | None = None
        self._broken: str | None = None
        # the priors given to the design, by counts (a fitted model's only; see _memo)
        self._memo: PriorMemo | None = None
        if model != "independent" and self.path is None:
            self._memo = PriorMemo(None, "", model, k)
        if self.path is not None:
            self._dir = AuditDirectory(self.path, read_only=self.read_only)
            records = self._dir.open(build_manifest(self), self, Audit._superseded)
            try:
                if model != "independent":
                    digest = manifest_digest(read_manifest(self.path))
                    self._memo = PriorMemo(self.path, digest, model, k)
                replay(self, records)
            except BaseException:
                self.close()
                raise
            self._save_memo()

    # ------------------------------------------------------------------ persistence
    def close(self) -> None:
        """Close the ledger and release the writer lock (idempotent; the object stays readable).

        Appending afterwards is an error; a closed audit can be reopened with
        :meth:`Audit.open`. Also used as a context manager: ``with Audit.open(...) as audit:``.
        """
        if self._dir is not None and self._dir.close() and self._broken is None:
            self._broken = "it was closed"

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

    # ------------------------------------------------------------------ claim and looks
    @property
    def claim(self) -> Claim | None:
        """The pre-registered :class:`Claim` (None: none registered, e.g. an older audit)."""
        return self._claim

    @property
    def looks_logged(self) -> tuple[LookRecord, ...]:
        """Every :class:`LookRecord` logged with :meth:`log_look`, in ledger order."""
        return tuple(self._looks_logged)

    def register_claim(self, claim: Claim) -> None:
        """Register the claim the audit will decide (once per audit; durable with a ``path``).

        Parameters
        ----------
        claim : Claim

        Raises
        ------
        ValueError
            A claim is already registered (it can never be replaced).
        """
        if not isinstance(claim, Claim):
            raise TypeError(
                f"claim={claim!r} has type {type(claim).__name__}; allowed: a "
                "bayes_eval.audit.Claim"
            )
        if self._claim is not None:
            raise ValueError(
                f"claim={claim!r} cannot be registered: this audit already has the claim "
                f"{self._claim!r}, and a pre-registered claim is never replaced"
            )
        self._check_usable()
        self._persist([event_record(claim, now())])
        self._claim = claim

    def log_look(self, record: LookRecord) -> None:
        """Append a look at the results to the ledger (durable before this returns).

        Works on an audit opened ``read_only=True`` too: the directory's writer lock is taken
        just for the append, and :class:`~bayes_eval._lock.AuditLockedError` (naming the holder's
        pid) is raised while another process writes. An empty ``record.time`` is set to now.

        Parameters
        ----------
        record : LookRecord
        """
        if not isinstance(record, LookRecord):
            raise TypeError(
                f"record={record!r} has type {type(record).__name__}; allowed: a "
                "bayes_eval.audit.LookRecord"
            )
        if not record.time:
            record = dataclasses.replace(record, time=now())
        line = event_record(record, record.time)
        if self._dir is not None and self._dir.ledger is not None:
            self._check_usable()
            self._persist([line])
        elif self._dir is not None:  # a reader, or a closed writer: lock just for this append
            self._dir.append_as_reader(line)
        self._looks_logged.append(record)

    @property
    def repaired_torn_line(self) -> bool:
        """Whether opening cut a torn (never acknowledged) last ledger line."""
        return self._dir is not None and self._dir.repaired_torn_line

    def _persist(self, records: list[dict[str, Any]]) -> None:
        if self._dir is None or self._dir.ledger is None:
            return
        try:
            self._dir.ledger.append(records)
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
        population: PopulationLike,
        *,
        strata: StrataLike | None = None,
        design: Design | None = None,
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
        kwargs = open_arguments(read_manifest(path), path, population, strata, design)
        return cls(population, path=path, read_only=read_only, **kwargs)

    # ------------------------------------------------------------------ ids
    def _canon_one(self, v: Any) -> Any:
        return int(v) if self.id_kind == "int" else str(v)

    def _canon(self, ids: Any, name: str = "ids") -> list[Any]:
        return canonical_ids(ids, self.id_kind, name)

    def _as_id_array(self, keys: list[Any]) -> np.ndarray:
        if self.id_kind == "int":
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
    def score_means(self) -> np.ndarray:
        """Mean score of every stratum (what score-aware designs and models use; a copy)."""
        return np.array(self._score_mean, dtype=np.float64)

    @property
    def rounds(self) -> int:
        """Proposal batches made so far."""
        return self._round

    def counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-stratum labels ``n_k`` and positives ``h_k`` (copies)."""
        return self._n.copy(), self._h.copy()

    def labels(self) -> pd.Series:
        """Recorded labels as a Series indexed by id (recording order), values 0/1."""
        import pandas as pd  # on first use: proposing and recording never need pandas

        keys = list(self._labels)
        return pd.Series(
            np.fromiter(self._labels.values(), dtype=np.uint8, count=len(keys)),
            index=pd.Index(self._as_id_array(keys), name="id"),
            name="label",
        )

    def _design_prior(self) -> tuple[np.ndarray, np.ndarray]:
        """:func:`~bayes_eval.models.design_prior` at the current counts; for a fitted model,
        remembered by counts (:mod:`bayes_eval.audit._memo`), so a replay refits only the
        states it has not seen."""
        memo = self._memo
        hit = None if memo is None else memo.get(self._n, self._h)
        if hit is None:
            hit = design_prior(
                self.model,
                self.strata,
                self._n,
                self._h,
                self.prior_a,
                self.prior_b,
                self._score_mean,
            )
            if memo is not None:
                memo.put(self._n, self._h, *hit)
        return hit

    def _save_memo(self) -> None:
        """Append the new design priors to the directory's memo (writers only)."""
        if self._memo is not None and self._dir is not None and self._dir.ledger is not None:
            self._memo.save()

    def design_state(self) -> DesignState:
        """The :class:`~bayes_eval.designs.DesignState` the next proposal will use."""
        pa, pb = self._design_prior()
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
            memory=self._design_memory,
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
        state = self._rng.bit_generator.state
        self._persist([proposal_line(self._round, counts, keys, state, now())])
        for key, kk in zip(keys, np.concatenate(strata_of).tolist(), strict=True):
            self._proposed[key] = int(kk)
            self._pending[key] = None
        self._drawn += counts
        self._round += 1
        self._save_memo()
        return self._as_id_array(keys)

    def record(
        self, ids: ArrayLike, labels: ArrayLike, *, annotators: Sequence[str] | None = None
    ) -> int:
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
        annotators : sequence of str, same length, optional
            Who gave each label (non-empty strings), kept in the ledger's label records; an id
            given twice in one call keeps its first annotator.

        Returns
        -------
        int
            Number of new labels recorded.
        """
        self._check_usable()
        new = new_labels(
            self._canon(ids, "ids"),
            labels,
            annotators,
            proposed=self._proposed,
            recorded=self._labels,
            population=self.population,
            id_array=self._as_id_array,
        )
        if not new:
            return 0
        self._persist(label_lines(new, now()))
        for key, y, _ in new:
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
        from ..posterior import estimate_from_stratum_counts  # on first use (xarray, scipy)

        gen = audit_generator(self.seed, self.n_labels) if rng is None else as_generator(rng)
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

    @property
    def look_model(self) -> str:
        """Posterior used at the looks of :meth:`run` (see there)."""
        if self.model != "hierarchical":
            return self.model  # the looks use the model itself (it is fast)
        return "independent with empirical-Bayes priors (hierarchical approximation)"

    def run(
        self,
        oracle: Callable[[np.ndarray], ArrayLike],
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
        from ._run import run_audit  # on first use: the posterior, stop rules and xarray

        return run_audit(
            self,
            oracle,
            budget=budget,
            batch_size=batch_size,
            stop=stop,
            level=level,
            final_posterior=final_posterior,
        )

    def __repr__(self) -> str:
        where = f", path={str(self.path)!r}" if self.path is not None else ""
        return (
            f"Audit(metric={self.metric!r}, design={self.design_name!r}, "
            f"prior={prior_label(self.model, self.prior_description)!r}, model={self.model!r}, "
            f"seed={self.seed}, "
            f"K={self._sizes.shape[0]}, {self.n_labels} labels, {len(self._pending)} pending, "
            f"{self._round} batches{where})"
        )
