"""Out-of-core populations on Dask: partitioned Parquet, lazy strata and a keyed sampler.

An audit needs the stratum boundaries, the exact stratum sizes ``N_k`` and the few items it
proposes; none of that needs the population in one process's memory.
:class:`DaskPopulation` reads a partitioned Parquet dataset (a directory, a glob or a list of
files) lazily; every pass over it is a Dask graph of one task per *piece* (a run of row groups of
one file) followed by a tree reduction, so the driver only ever holds per-piece summaries:
histograms, per-stratum counts, bottom-k reservoirs.

Modules, lowest first (each imports only those before it):

* ``_pieces``: pieces of a Parquet dataset, reading one piece, tree reductions;
* ``_dataset``: :class:`~bayes_eval.dask._dataset.PieceSet`, where passes run; the validating
  scan (at construction) and look-ups by position or id;
* ``_stratify``: exact strata in passes (histogram, collect, count);
* ``_profile``: the pooled model's per-stratum score histogram in one pass (the in-memory
  profile's own grid and cell functions);
* ``strata``: :class:`DaskStrata` (a :class:`~bayes_eval._protocols.StrataLike`) and the
  out-of-core keyed sampler :class:`DaskStratumSampler`;
* ``population``: :class:`DaskPopulation` (a :class:`~bayes_eval._protocols.PopulationLike`).

Costs: the scan, 3 stratification passes for ``"equal_size"`` (one more per re-binning level
when a target bin holds over ``COLLECT_LIMIT`` items), 2 for the other methods, 1 reservoir
pass; for the pooled model one profile pass per strata object (margins: 2-3 more, once per
population); then O(m) per batch of m proposals. Driver memory is bounded by the summaries,
whatever N; each task holds one piece. Needs the ``dask`` extra (``dask[dataframe]``,
``distributed``), imported when a pass runs.

References
----------
Bennett & Carvalho, ``../shared/seeds/000_51972d8d13fae9c1.txt`` (web-scale populations, score
strata). Kumar & Raj, ``../shared/seeds/003_d8c568d527ba610a.txt`` (stratification methods).
"""

from ._pieces import ROWS_PER_PIECE
from ._stratify import COLLECT_LIMIT, DISTINCT_LIMIT, HIST_BINS, QUANTILE_SAMPLE
from .population import DaskPopulation
from .strata import DEFAULT_RESERVOIR, DaskStrata, DaskStratumSampler

__all__ = [
    "COLLECT_LIMIT",
    "DEFAULT_RESERVOIR",
    "DISTINCT_LIMIT",
    "HIST_BINS",
    "QUANTILE_SAMPLE",
    "ROWS_PER_PIECE",
    "DaskPopulation",
    "DaskStrata",
    "DaskStratumSampler",
]
