"""The population and strata of an audit, stored once as memory-mappable arrays.

Reopening an audit on 10^7 items used to mean parsing the population file again, re-stratifying
(a sort of all scores) and building an id index: seconds of work per command, for a batch of 20.
An audit directory can therefore keep, in its subdirectory ``population/``, what later commands
need, written once (at ``init``) by :func:`write_store` and opened by :func:`open_store` as
read-only memory maps, so a command reads only the pages it touches:

=====================  ======================================================================
``scores.npy``         float64 score of every item (population order)
``predictions.npy``    bool predicted label of every item
``ids.npy``            int64 or fixed-width string ids (absent for the default ids ``0..N-1``)
``ids_sorted.npy``     the ids sorted, and ``ids_positions.npy`` their positions: a
                       binary-search id index (:class:`bayes_eval.population.SortedIds`)
``stratum.npy``        stratum of every item (int16, or int32 beyond 32,766 strata)
``order.npy``          positions grouped by stratum (offsets in ``store.json``), each stratum in
                       the audit's sampling order (below)
``store.json``         sizes, dtypes and byte sizes of the files, the population fingerprint,
                       the strata's manifest entry, the seed, and whatever the caller adds
                       (the command line records the population file's size, mtime and SHA-256)
``profile_*.npy``      only for the pooled model: its
                       :class:`~bayes_eval.models._profile.ScoreProfile` (arrays ``x``,
                       ``weight``, ``sizes``, ``predicted``), with ``profile.json`` (``kind``,
                       ``center``, the recipe, the files' dtypes and sizes) written last
=====================  ======================================================================

The pooled model's score profile is one O(N) pass over the scores and the strata
(:func:`bayes_eval.models._profile.profile_of_strata`); it is computed once, at ``init``, and
read back (a few kilobytes) by every later command. A store written without it (an older
release, or another model) gets it on first use from :func:`ensure_profile`: computed from the
stored arrays, and written by a writer. :func:`open_store` attaches a stored profile to the
strata (``StoredStrata.score_profile``), which
:func:`~bayes_eval.models._profile.score_profile_of` returns, so an in-process
:class:`~bayes_eval.Audit` on the stored strata never scans the population either.

The sampling order is the audit's own: inside stratum ``k``, items in increasing hash key of their
id and the audit's seed (ties broken by id), exactly the order of
:class:`bayes_eval._sampler.KeyedStratumSampler`, sorted once here instead of per process. The
first ``c`` items of that order are a uniform sample without replacement of size ``c`` (bottom-k
sampling with exchangeable keys), so proposing is taking the next unproposed items of each
stratum: O(batch) per ``next``, and an audit continues with exactly the proposals it would have
made without the store. Per batch, nothing scans the population.

Every file is written to a temporary directory, ``fsync``'d, and the directory renamed into place,
so a store is complete or absent. :func:`open_store` checks the files' sizes and dtypes against
``store.json`` and returns None for a missing, incomplete or foreign store; the caller then falls
back to reading the population file (and may write the store again).

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` and Kumar & Raj,
``../shared/seeds/003_d8c568d527ba610a.txt``: a uniform sample without replacement within each
stratum is all the stratified estimators require.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._mapped import take, take_range
from .._protocols import PopulationLike, StrataLike, score_mean, strata_repr
from ..ledger import fsync_dir, write_json_atomic
from ..population import Population, SortedIds
from ._manifest import strata_info

__all__ = ["STORE_DIR", "StoredStrata", "ensure_profile", "open_store", "write_store"]

STORE_DIR = "population"
_META = "store.json"
_FORMAT = "bayes_eval-store"
_VERSION = 1
_PROFILE = "profile.json"
_PROFILE_FORMAT = "bayes_eval-score-profile"
_PROFILE_ARRAYS = ("x", "weight", "sizes", "predicted")


class StoredSampler:
    """Draws the next items of a stratum in the stored sampling order (see the module docstring).

    Same interface as :class:`bayes_eval._sampler.KeyedStratumSampler` (``draw``,
    ``draw_positions``, ``skip``, ``available``).
    """

    def __init__(self, strata: StoredStrata) -> None:
        self.strata = strata
        self.sizes = strata.sizes
        self.drawn = np.zeros(strata.n_strata, dtype=np.int64)

    def _take(self, k: int, m: int) -> np.ndarray:
        if not 0 <= k < self.sizes.shape[0]:
            raise ValueError(f"stratum k={k} is outside 0..{self.sizes.shape[0] - 1}")
        m = int(m)
        if m < 0 or m > self.sizes[k] - self.drawn[k]:
            raise ValueError(
                f"m={m} is outside 0..{int(self.sizes[k] - self.drawn[k])}, the items of stratum "
                f"{k} not yet drawn"
            )
        start = int(self.strata.offsets[k] + self.drawn[k])
        self.drawn[k] += m
        return take_range(self.strata.order, start, start + m).astype(np.int64)

    def draw(self, k: int, m: int) -> np.ndarray:
        """Ids of the next ``m`` items of stratum ``k`` in sampling order (never repeated)."""
        return self.strata.population.ids_at(self._take(k, m))

    def draw_positions(self, k: int, m: int) -> np.ndarray:
        """Like :meth:`draw` but population positions."""
        return self._take(k, m)

    def skip(self, k: int, c: int) -> None:
        """Advance stratum ``k`` by ``c`` items, as if they had been drawn."""
        self._take(k, c)

    def available(self) -> np.ndarray:
        """Items not yet drawn, per stratum."""
        return self.sizes - self.drawn


class StoredStrata:
    """Strata read back from a store: the interface of :class:`bayes_eval.Strata` on memory maps.

    ``assignment`` (the stratum of every item) is a read-only memory map; ``assignment_sha256``
    and ``score_mean`` come from the store, so reopening never hashes or scans the population.
    :meth:`make_sampler` gives a :class:`StoredSampler` for the seed the store was written with.
    """

    def __init__(
        self,
        population: Population,
        info: dict[str, Any],
        means: np.ndarray,
        seed: int,
        assignment: np.ndarray,
        order: np.ndarray,
        offsets: np.ndarray,
    ) -> None:
        self.population = population
        self.method = info["method"]
        self.variable = info["variable"]
        req = info["requested"]
        self.requested = None if req is None else tuple(req)
        self.sizes = np.asarray(info["sizes"], dtype=np.int64)
        self.predicted = np.asarray(info["predicted"], dtype=bool)
        self.score_min = np.asarray(info["score_min"], dtype=np.float64)
        self.score_max = np.asarray(info["score_max"], dtype=np.float64)
        self.assignment_sha256 = info["assignment_sha256"]
        self.score_mean = means
        self.seed = seed
        self.assignment = assignment
        self.order = order
        self.offsets = offsets
        #: the pooled model's stored score profile (None until stored or computed)
        self.score_profile: Any = None

    @property
    def n_strata(self) -> int:
        """Number of strata K."""
        return int(self.sizes.shape[0])

    def stratum_of(self, positions: np.ndarray) -> np.ndarray:
        """Stratum index of the items at ``positions``."""
        return take(self.assignment, positions).astype(np.int64)

    def members(self, k: int) -> np.ndarray:
        """Positions of the items of stratum ``k``, increasing."""
        return np.sort(
            take_range(self.order, self.offsets[k], self.offsets[k + 1]).astype(np.int64)
        )

    def make_sampler(self, seed: int) -> Any:
        """The stored sampling order (for the store's seed; another seed re-sorts the keys)."""
        if int(seed) == self.seed:
            return StoredSampler(self)
        from .._sampler import KeyedStratumSampler  # only for a seed the store was not made for

        return KeyedStratumSampler(self, seed)

    def to_dataset(self) -> Any:
        """Per-stratum facts as :class:`xarray.Dataset` (see ``bayes_eval.Strata.to_dataset``)."""
        from ..strata import Strata  # on first use: proposing and recording never need xarray

        return Strata.to_dataset(self)  # type: ignore[arg-type]  # reads StrataLike members only

    def __repr__(self) -> str:
        return strata_repr(self)


@dataclass(frozen=True, slots=True)
class Store:
    """An opened store: the population, its strata, and the caller's extra metadata."""

    population: Population
    strata: StoredStrata
    extra: dict[str, Any]


def _sampling_order(strata: StrataLike, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions grouped by stratum, each in the keyed sampler's order, and the offsets."""
    from .._sampler import item_keys  # written once, at init

    pop = strata.population
    k = int(strata.n_strata)
    offsets = np.zeros(k + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(np.asarray(strata.sizes, dtype=np.int64))
    dtype = np.int32 if pop.size < 2**31 else np.int64
    order = np.empty(pop.size, dtype=dtype)
    for kk in range(k):
        members = strata.members(kk)
        ids = pop.ids_at(members)
        keys = item_keys(ids, seed)
        if np.issubdtype(ids.dtype, np.integer):
            idx = np.argsort(keys, kind="stable")  # distinct ids have distinct keys
        else:
            idx = np.lexsort((ids, keys))  # ties (a 2^-64 chance) broken by the id
        order[offsets[kk] : offsets[kk + 1]] = members[idx]
    return order, offsets


def _save(directory: Path, name: str, array: np.ndarray, files: dict[str, Any]) -> None:
    path = directory / f"{name}.npy"
    with open(path, "wb") as fh:
        np.save(fh, np.ascontiguousarray(array), allow_pickle=False)
        fh.flush()
        os.fsync(fh.fileno())
    files[name] = {
        "dtype": np.asarray(array).dtype.str,
        "shape": list(np.shape(array)),
        "bytes": path.stat().st_size,
    }


def write_store(
    audit_dir: str | Path,
    population: PopulationLike,
    strata: StrataLike,
    seed: int,
    extra: dict[str, Any] | None = None,
    means: np.ndarray | None = None,
    profile: Any = None,
) -> bool:
    """Write the store of an audit (see the module docstring); False when it cannot be stored.

    Only in-memory populations and strata with an in-memory assignment are stored (an
    out-of-core population is read as before). ``extra`` is kept in ``store.json``; ``means``
    (the strata's mean scores, when the caller has them) saves a pass over the population;
    ``profile`` (the pooled model's :class:`~bayes_eval.models._profile.ScoreProfile` of
    ``strata``) is stored with the arrays.
    """
    assignment = getattr(strata, "assignment", None)
    if type(population) is not Population or not isinstance(assignment, np.ndarray):
        return False
    audit_dir = Path(audit_dir)
    tmp = audit_dir / f".{STORE_DIR}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        files: dict[str, Any] = {}
        _save(tmp, "scores", population.scores, files)
        _save(tmp, "predictions", population.predictions, files)
        if not population.has_default_ids:
            ids = population.ids
            index = SortedIds.build(ids)
            _save(tmp, "ids", ids, files)
            _save(tmp, "ids_sorted", index.sorted_ids, files)
            _save(tmp, "ids_positions", index.positions, files)
        k = int(strata.n_strata)
        _save(tmp, "stratum", assignment.astype(np.int16 if k < 2**15 - 1 else np.int32), files)
        order, offsets = _sampling_order(strata, seed)
        _save(tmp, "order", order, files)
        meta = {
            "format": _FORMAT,
            "version": _VERSION,
            "size": int(population.size),
            "fingerprint": population.fingerprint(),
            "threshold": population.threshold,
            "default_ids": bool(population.has_default_ids),
            "seed": int(seed),
            "strata": strata_info(strata),
            "score_mean": (score_mean(strata) if means is None else means).tolist(),
            "offsets": offsets.tolist(),
            "files": files,
            "extra": extra or {},
        }
        write_json_atomic(tmp / _META, meta)
        if profile is not None:
            write_profile(tmp, profile)
        final = audit_dir / STORE_DIR
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        fsync_dir(audit_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return True


def update_extra(audit_dir: str | Path, extra: dict[str, Any]) -> None:
    """Replace the caller's metadata of an existing store (atomically)."""
    path = Path(audit_dir) / STORE_DIR / _META
    meta = json.loads(path.read_text(encoding="utf-8"))
    meta["extra"] = extra
    write_json_atomic(path, meta)


def _load(directory: Path, name: str, meta: dict[str, Any]) -> np.ndarray | None:
    want = meta["files"].get(name)
    path = directory / f"{name}.npy"
    if want is None or not path.is_file() or path.stat().st_size != want["bytes"]:
        return None
    arr = np.load(path, mmap_mode="r", allow_pickle=False)
    if arr.dtype.str != want["dtype"] or list(arr.shape) != want["shape"]:
        return None
    return arr


# ------------------------------------------------------------------ the pooled model's profile
def _profile_recipe() -> dict[str, Any]:
    """How a stored profile was made (a stored profile of another recipe is made again)."""
    from ..models import _profile

    bins = (_profile.profile_of_strata.__kwdefaults__ or {}).get("bins")
    return {
        "function": "profile_of_strata",
        "bins": bins,
        "cell_budget": getattr(_profile, "CELL_BUDGET", None),
    }


def write_profile(directory: str | Path, profile: Any) -> None:
    """Store ``profile`` in the store directory ``directory``: every array atomically
    (:func:`bayes_eval.ledger.write_bytes_atomic`), then ``profile.json``, so a profile is
    complete exactly when ``profile.json`` describes the files present."""
    from ..ledger import write_bytes_atomic

    directory = Path(directory)
    files: dict[str, Any] = {}
    for name in _PROFILE_ARRAYS:
        array = np.ascontiguousarray(getattr(profile, name))
        buf = io.BytesIO()
        np.save(buf, array, allow_pickle=False)
        data = buf.getvalue()
        write_bytes_atomic(directory / f"profile_{name}.npy", data)
        files[name] = {"dtype": array.dtype.str, "shape": list(array.shape), "bytes": len(data)}
    meta = {
        "format": _PROFILE_FORMAT,
        "version": 1,
        "kind": str(profile.kind),
        "center": float(profile.center),
        "recipe": _profile_recipe(),
        "files": files,
    }
    write_json_atomic(directory / _PROFILE, meta)


def read_profile(directory: str | Path, strata: StrataLike) -> Any:
    """The :class:`~bayes_eval.models._profile.ScoreProfile` stored in the store directory
    ``directory`` for ``strata``, or None (absent, incomplete, another recipe, other strata)."""
    directory = Path(directory)
    try:
        meta = json.loads((directory / _PROFILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("format") != _PROFILE_FORMAT:
        return None
    if meta.get("version") != 1 or meta.get("recipe") != _profile_recipe():
        return None
    if meta.get("kind") not in ("probability", "margin", "constant"):
        return None
    try:
        files = {f"profile_{name}": want for name, want in meta["files"].items()}
        arrays = {
            name: _load(directory, f"profile_{name}", {"files": files}) for name in _PROFILE_ARRAYS
        }
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if any(a is None for a in arrays.values()):
        return None
    x, weight = np.array(arrays["x"]), np.array(arrays["weight"])
    sizes, predicted = np.array(arrays["sizes"]), np.array(arrays["predicted"])
    k = int(strata.n_strata)
    if (
        x.dtype != np.float64
        or weight.dtype != np.float64
        or x.ndim != 2
        or x.shape != weight.shape
        or x.shape[0] != k
        or sizes.dtype != np.int64
        or predicted.dtype != bool
        or not np.array_equal(sizes, np.asarray(strata.sizes, dtype=np.int64))
        or not np.array_equal(predicted, np.asarray(strata.predicted, dtype=bool))
    ):
        return None
    from ..models._profile import ScoreProfile

    return ScoreProfile(x, weight, sizes, predicted, meta["kind"], float(meta["center"]))


def attach_profile(strata: StrataLike, profile: Any) -> None:
    """Make ``profile`` the pooled model's score profile of ``strata``: sets
    ``strata.score_profile``, which :func:`bayes_eval.models._profile.score_profile_of` (what
    the pooled model and its design prior call) returns, so neither scans the population."""
    strata.score_profile = profile


def ensure_profile(audit_dir: str | Path, store: Store, *, write: bool) -> Any:
    """The pooled model's score profile of a store: the stored one, or (a store without it,
    e.g. written by an older release) computed once from the stored arrays, stored when
    ``write`` (a writer command; a failure to write just means computing it again next time),
    and attached to the stored strata (:func:`attach_profile`)."""
    strata = store.strata
    profile = strata.score_profile
    if profile is None:
        from ..models._profile import profile_of_strata

        profile = profile_of_strata(strata)  # the one O(N) pass, over the memory maps
        if write:
            with contextlib.suppress(OSError):
                write_profile(Path(audit_dir) / STORE_DIR, profile)
        attach_profile(strata, profile)
    return profile


def open_store(audit_dir: str | Path) -> Store | None:
    """The stored population and strata of an audit directory, or None (no usable store)."""
    directory = Path(audit_dir) / STORE_DIR
    try:
        meta = json.loads((directory / _META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
        return None
    if meta.get("version") != _VERSION:
        return None
    names = ["scores", "predictions", "stratum", "order"]
    if not meta["default_ids"]:
        names += ["ids", "ids_sorted", "ids_positions"]
    try:
        arrays = {name: _load(directory, name, meta) for name in names}
    except (OSError, ValueError):
        return None
    if any(a is None for a in arrays.values()):
        return None
    index = None
    if not meta["default_ids"]:
        index = SortedIds(arrays["ids_sorted"], arrays["ids_positions"])
    pop = Population._from_checked_arrays(
        arrays["scores"],
        arrays["predictions"],
        arrays.get("ids"),
        meta["threshold"],
        meta["fingerprint"],
        index=index,
    )
    strata = StoredStrata(
        pop,
        meta["strata"],
        np.asarray(meta["score_mean"], dtype=np.float64),
        int(meta["seed"]),
        arrays["stratum"],
        arrays["order"],
        np.asarray(meta["offsets"], dtype=np.int64),
    )
    if (directory / _PROFILE).is_file():
        profile = read_profile(directory, strata)
        if profile is not None:
            attach_profile(strata, profile)
    return Store(pop, strata, meta.get("extra", {}))
