r"""Worker processes for the pooled look model's refits (``n_jobs``).

A sequential calibration of a pooled audit spends most of its time refitting the look model
(:func:`bayes_eval.models._look.look_refit`; ~85 % of the demo setting's CPU, session 35's
profile): at every refit each distinct row of counts is fitted on its own, in chunks of
:data:`bayes_eval.sequential._paths.REFIT_CHUNK` rows. :class:`RefitPool` fits those chunks in
``n_jobs`` worker processes. Nothing else changes: the chunks, their order and every random
stream are those of one process, and a chunk's fit does not depend on where it runs, so the
calibration is the same **bit for bit** whatever ``n_jobs`` is (tested), and ``n_jobs`` is not
part of the calibration's cache key.

The workers are started with ``spawn`` (a fresh interpreter: ``fork`` is unsafe in a process
that runs threads), on the first refit with more than one chunk, and live until the calibration
ends; each imports the compiled kernels once (a few seconds, ~0.2 GB). The module lives in
:mod:`bayes_eval.models`, so a worker imports the model's numerics only (numpy, scipy, numba;
not xarray or pandas). As with every process pool, a script that asks for ``n_jobs > 1`` must
do so under ``if __name__ == "__main__":``. A pool whose worker dies (killed, out of memory, or a
script without that guard) raises :class:`WorkerPoolError`.

An interrupted calibration (Ctrl-C, or any exception inside the pool's block) stops the workers
at once instead of waiting for their chunks: a terminal's Ctrl-C reaches the whole process group,
so the workers ignore SIGINT and leave it to the parent, which terminates them. (A graceful
shutdown interrupted by a second SIGINT -- ``uv run`` forwards the terminal's to its child, so
the parent gets two -- left the interpreter joining workers that never got their stop sentinel:
a hang, session 42.)

Each chunk carries the importance design in force where it was made
(:func:`bayes_eval.models._laplace.integration_settings`), so a benchmark's
:func:`~bayes_eval.models._laplace.integration` block holds in the workers too.
"""

from __future__ import annotations

import os
import signal
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, fields
from multiprocessing import get_context
from types import TracebackType
from typing import TYPE_CHECKING, Any

import numpy as np

from ._profile import ScoreProfile

if TYPE_CHECKING:  # the workers import this module before they ignore SIGINT: keep it light
    from ._node_sample import NodeSample

__all__ = [
    "ChunkFit",
    "RefitChunk",
    "RefitPool",
    "WorkerPoolError",
    "concat_fits",
    "concat_samples",
    "fit_chunk",
    "resolve_n_jobs",
]


class WorkerPoolError(RuntimeError):
    """The worker processes of ``n_jobs`` stopped before the calibration ended."""


def resolve_n_jobs(n_jobs: int) -> int:
    """Processes that ``n_jobs`` (checked by :func:`bayes_eval._validation.check_n_jobs`) asks
    for: ``-1`` is every CPU this process may run on."""
    if n_jobs != -1:
        return n_jobs
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not on Linux
        return max(os.cpu_count() or 1, 1)


@dataclass(frozen=True, slots=True)
class RefitChunk:
    """One chunk of distinct count rows to refit: ``n, h`` (R, K), the warm starts ``init``
    (R, 5) or ``None``, the linear form's weights ``w`` (K,) and finite-population flag, and the
    importance design in force (:func:`bayes_eval.models._laplace.integration_settings`)."""

    profile: ScoreProfile
    n: np.ndarray
    h: np.ndarray
    init: np.ndarray | None
    w: np.ndarray
    finite: bool
    integration: tuple[int, float, int, float]
    cols: np.ndarray | None = None  # strata whose hyper-nodes are kept (NodeSample)


@dataclass(frozen=True, slots=True)
class ChunkFit:
    """What the look model keeps of a chunk's refit: each row's effective Beta priors
    ``prior_a, prior_b`` and allocation rates ``rate`` (R, K), its hyper-mode ``mode`` (R, 5) and
    the linear form's node ``weight`` and cumulants ``k1, k2, k3`` (R, S), and given the chunk's
    ``cols`` a :class:`~bayes_eval.models._node_sample.NodeSample` (else ``None``)."""

    prior_a: np.ndarray
    prior_b: np.ndarray
    rate: np.ndarray
    mode: np.ndarray
    weight: np.ndarray
    k1: np.ndarray
    k2: np.ndarray
    k3: np.ndarray
    sample: NodeSample | None = None


def fit_chunk(chunk: RefitChunk) -> ChunkFit:
    """Refit one chunk (in this process or a worker; the same numbers either way)."""
    from . import _laplace

    if chunk.integration != _laplace.integration_settings():
        with _laplace.integration(*chunk.integration):
            return _fit(chunk)
    return _fit(chunk)


def _fit(chunk: RefitChunk) -> ChunkFit:
    from . import allocation_prior, allocation_rate
    from ._look import look_refit

    fit = look_refit(
        chunk.profile, chunk.n, chunk.h, chunk.w, finite_population=chunk.finite,
        init=chunk.init, cols=chunk.cols,
    )  # fmt: skip
    # the design's Betas (design_prior of the fit: its allocation rates at the counts)
    ua, ub = allocation_prior(allocation_rate(fit, chunk.profile), chunk.n, chunk.h)
    rate = (ua + chunk.h) / (ua + ub + chunk.n)
    nodes = fit.nodes
    return ChunkFit(
        fit.prior_a, fit.prior_b, rate, fit.mode, nodes.weight, nodes.k1, nodes.k2, nodes.k3,
        fit.sample,
    )  # fmt: skip


class RefitPool:
    """Fits refit chunks in ``n_jobs`` processes (``1``: in this one, no worker is started).

    Use as a context manager around a calibration; the workers start on the first
    :meth:`map` with more than one chunk and stop when the block ends.

    Parameters
    ----------
    n_jobs : int
        Checked ``n_jobs`` (:func:`bayes_eval._validation.check_n_jobs`): ``-1`` = one process
        per CPU this process may use.
    """

    def __init__(self, n_jobs: int = 1) -> None:
        self.n_jobs = int(n_jobs)
        self.processes = resolve_n_jobs(self.n_jobs)
        self._executor: ProcessPoolExecutor | None = None

    def __repr__(self) -> str:
        return f"RefitPool(n_jobs={self.n_jobs}, processes={self.processes})"

    def map(self, chunks: list[RefitChunk]) -> list[ChunkFit]:
        """Every chunk's fit, in the order of ``chunks``."""
        if self.processes == 1 or len(chunks) < 2:
            return [fit_chunk(c) for c in chunks]
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                max_workers=self.processes,
                mp_context=get_context("spawn"),
                initializer=_ignore_sigint,
            )
        try:
            return list(self._executor.map(fit_chunk, chunks))
        except BrokenProcessPool as err:
            self.close()
            raise WorkerPoolError(
                f"the worker processes of n_jobs={self.n_jobs} stopped ({err}); a worker "
                "that runs out of memory or is killed stops the pool, and a script that asks "
                "for n_jobs > 1 must do so under `if __name__ == '__main__':`; allowed "
                "instead: n_jobs=1 (no worker process)"
            ) from err

    def close(self, *, abort: bool = False) -> None:
        """Stop the workers (idempotent): after their running chunks, or at once with
        ``abort=True`` (and whenever the wait itself is interrupted)."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        if abort:
            _terminate(executor)
            return
        try:
            executor.shutdown(wait=True, cancel_futures=True)
        except BaseException:  # e.g. a second Ctrl-C while waiting: nothing may be left running
            _terminate(executor)
            raise

    def __enter__(self) -> RefitPool:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(abort=exc_type is not None)


def _ignore_sigint() -> None:
    """A worker's initializer: Ctrl-C is the parent's to handle (it stops the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _terminate(executor: ProcessPoolExecutor) -> None:
    """Stop ``executor``'s workers now (SIGTERM, then SIGKILL for one that lingers; their chunks
    are not waited for) and reap them before returning."""
    # the executor's own table of its processes (no public handle before Python 3.14)
    procs = list((getattr(executor, "_processes", None) or {}).values())
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    executor.shutdown(wait=True, cancel_futures=True)
    for proc in procs:  # an interrupted shutdown may not join them again (Thread.join state)
        proc.join(_REAP_SECONDS)
        if proc.is_alive():
            proc.kill()
            proc.join()


_REAP_SECONDS = 10.0  # a terminated worker's time to exit before SIGKILL


def concat_fits(fits: list[ChunkFit], inverse: np.ndarray) -> tuple[Any, ...]:
    """The chunks' array fields joined over rows and taken at ``inverse`` (the calibration's
    rows): ``prior_a, prior_b, rate, mode, weight, k1, k2, k3`` (see :func:`concat_samples`)."""
    names = [f.name for f in fields(ChunkFit) if f.name != "sample"]
    return tuple(np.concatenate([getattr(f, name) for f in fits])[inverse] for name in names)


def concat_samples(fits: list[ChunkFit], inverse: np.ndarray) -> NodeSample | None:
    """The chunks' node samples joined over rows and taken at ``inverse`` (``None`` if the
    chunks kept none)."""
    if fits[0].sample is None:
        return None
    from ._node_sample import NodeSample

    return NodeSample.concat([f.sample for f in fits]).take(inverse)
