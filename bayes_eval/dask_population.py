"""Out-of-core populations on Dask (kept for existing imports): see :mod:`bayes_eval.dask`.

``from bayes_eval.dask_population import DaskPopulation, DaskStrata, DaskStratumSampler`` keeps
working; new code imports from :mod:`bayes_eval.dask`.
"""

from .dask import DaskPopulation, DaskStrata, DaskStratumSampler

__all__ = ["DaskPopulation", "DaskStrata", "DaskStratumSampler"]
