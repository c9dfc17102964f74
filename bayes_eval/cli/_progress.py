"""Progress on standard error: counted bars (count, rate, ETA) and spinners.

Long steps of the CLI report real progress: the calibration of the sequential correction and
the simulations behind it (simulated audits done of ``n_sims``), the labelling of the demo's
simulated judge (labels of the budget), and the steps of building a report (looks of the
trajectory re-estimated, figures drawn). A step whose length is unknown shows a spinner with
the elapsed time. Everything goes to standard error, so ``--json`` output and CSV written to
standard output stay clean; when standard error is not a terminal, rich draws nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ._app import _console

__all__ = ["Bars", "ProgressCallback", "_spinner", "bars"]

#: ``callback(done, total)``: the signature the library's long computations call
ProgressCallback = Callable[[int, int], None]


def _columns() -> tuple[Any, ...]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return (
        TextColumn("{task.description}"),
        BarColumn(bar_width=16),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(compact=True),
    )


def _rate(task: Any, unit: str) -> str:
    """Items per second: rich's recent speed, or the average once the task has finished."""
    speed = task.finished_speed or task.speed
    if not speed and task.elapsed:
        speed = task.completed / task.elapsed
    if not speed:
        return f"-- {unit}/s"
    return f"{speed:,.0f} {unit}/s" if speed >= 10 else f"{speed:.2g} {unit}/s"


@dataclass(slots=True)
class Bars:
    """Counted progress bars on one rich ``Progress`` display (see :func:`bars`)."""

    progress: Any
    units: dict[int, str] = field(default_factory=dict)

    def _task(self, task: int) -> Any:
        """The rich task with id ``task`` (``Progress.tasks`` is a list: ids are not indices
        once a task was removed)."""
        return next(t for t in self.progress.tasks if t.id == task)

    def add(self, description: str, *, total: int | None, unit: str = "it") -> int:
        """A new bar; ``total=None`` until the total is known (then it pulses)."""
        task = self.progress.add_task(description, total=total, rate=f"-- {unit}/s")
        self.units[task] = unit
        return int(task)

    def update(self, task: int, done: int, total: int | None = None) -> None:
        """Set the bar to ``done`` of ``total`` (the total may change: a recalibration)."""
        kw: dict[str, Any] = {"completed": int(done)}
        if total is not None:
            kw["total"] = int(total)
        self.progress.update(task, **kw)
        self.progress.update(task, rate=_rate(self._task(task), self.units[task]))

    def advance(self, task: int, step: int = 1) -> None:
        """Advance the bar by ``step``."""
        self.update(task, int(self._task(task).completed) + int(step))

    def finish(self, task: int, *, none_done: str = "nothing to do") -> None:
        """Mark the bar complete at its current count, which becomes its total; a bar that
        never counted anything (a result found in a cache) is replaced by a line saying
        ``none_done``."""
        t = self._task(task)
        if t.total is None and not t.completed:
            self.progress.remove_task(task)
            self.progress.console.print(f"{t.description}: {none_done}")
            return
        done = int(t.completed)
        self.update(task, done, total=max(done, 1))

    def drop(self, task: int) -> None:
        """Remove the bar (its work failed: the error line says why)."""
        self.progress.remove_task(task)

    @contextmanager
    def step(self, description: str) -> Iterator[None]:
        """A step with nothing to count (drawing a report): a pulsing bar with the elapsed time
        while it runs, then one line with the time it took."""
        import time

        task = self.progress.add_task(description, total=None, rate="")
        t0 = time.perf_counter()
        yield
        self.progress.remove_task(task)
        self.progress.console.print(f"{description}: done in {time.perf_counter() - t0:.1f} s")

    def callback(self, task: int) -> ProgressCallback:
        """``callback(done, total)`` for the library's ``progress=`` parameters."""

        def report(done: int, total: int) -> None:
            self.update(task, done, total)

        return report


@contextmanager
def bars() -> Iterator[Bars]:
    """A progress display on standard error with counted bars (count, rate, elapsed, ETA).

    Examples
    --------
    >>> with bars() as b:  # doctest: +SKIP
    ...     task = b.add("simulated audits", total=4000, unit="audits")
    ...     correction_for(..., progress=b.callback(task))
    """
    from rich.progress import Progress

    with Progress(*_columns(), console=_console(stderr=True), transient=False) as progress:
        yield Bars(progress)


class _spinner:
    """A spinner with a description for a step whose length is unknown."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._status: Any = None

    def __enter__(self) -> _spinner:
        self._status = _console(stderr=True).status(self.text)
        self._status.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._status.__exit__(*exc)
