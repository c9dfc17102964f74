"""The ``bayes-eval`` Typer application and its error handling.

User errors (bad options, a missing column, a label outside 0/1, ...) print one ``error: ...``
line on stderr and exit with status 1; usage errors (``-n 2.5``, an unknown flag) print one
``error:`` line and exit with status 2. No traceback reaches the user.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core

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


def _n_jobs(value: int) -> int:
    """``--n-jobs``: the library's rule (:func:`bayes_eval._validation.check_n_jobs`), worded
    for the flag."""
    from .._validation import MAX_N_JOBS, check_n_jobs

    try:
        return check_n_jobs(value, "--n-jobs")
    except ValueError:
        raise UserError(
            f"--n-jobs {value} is out of range; allowed: 1 to {MAX_N_JOBS:,}, or -1 (one per CPU)"
        ) from None


N_JOBS_HELP = (
    "Processes for the sequential calibration (-1: one per CPU). The corrected levels are the "
    "same whatever it is."
)


@contextlib.contextmanager
def flags_for(args: dict[str, str], tidy: Callable[[str], str] | None = None) -> Any:
    """Re-raise the library's validation errors (which name its arguments, ``size_12=20``)
    naming the flags as typed (``--size-12=20``): an argument with an underscore wherever it
    appears as a word, a plain word (``universe``, ``scores``) only where it is followed by
    ``=`` or opens the message (prose keeps its words); ``tidy`` then rewrites values into the
    form the flags take."""
    words = "|".join(re.escape(a) for a in sorted(args, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w-])({words})\b")
    try:
        yield
    except (ValueError, TypeError) as exc:
        named = []

        def flag(m: re.Match[str]) -> str:
            name = m.group(1)
            if "_" in name or m.string[m.end() : m.end() + 1] == "=" or m.start() == 0:
                named.append(name)
                return args[name]
            return name

        text = pattern.sub(flag, _one_line(exc))
        if not named:  # not about one of these arguments: as it was
            raise
        raise UserError(text if tidy is None else tidy(text)) from None


def _max_mcse(value: float) -> float:
    """``--max-mcse``, checked before any work (the calibration checks it only when a
    correction is needed)."""
    from .._validation import check_max_mcse

    return check_max_mcse(value, "--max-mcse")


_INTERRUPTED = 130  # the shell's status for a command stopped by SIGINT (128 + 2)
_TERMINATED = 143  # ... and by SIGTERM (128 + 15)


class _Terminated(BaseException):
    """SIGTERM (``kill``, a scheduler's stop), raised in the main thread like Ctrl-C so that the
    cleanup runs on the way out: the refit workers are terminated and reaped, the ledger's lock
    is released. (A BaseException: no ``except Exception`` swallows it.)"""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated


@contextlib.contextmanager
def _sigterm_raises():
    """While the command runs, SIGTERM raises :class:`_Terminated` (the previous handler comes
    back after); outside the main thread (where Python allows no handler) nothing changes."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
            with _sigterm_raises():
                rv = super().main(*args, standalone_mode=False, **kwargs)
        except _Terminated:
            typer.echo("error: terminated", err=True)
            sys.exit(_TERMINATED)
        except cx.NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except cx.UsageError as exc:
            where = ""
            param = getattr(exc, "param", None)
            opts = list(getattr(param, "opts", None) or [])
            text = " ".join(exc.format_message().split())
            typed = _typed_option(_argv(args, kwargs), opts)
            if typed is not None:  # name the flag as typed and the value given
                flag, value = typed
                for prefix in ("Invalid value for " + " / ".join(repr(o) for o in opts) + ": ",):
                    text = text.removeprefix(prefix)
                where = f"{flag} {value!r}: "
            elif opts and not any(o in text for o in opts):
                where = f"{'/'.join(opts)}: "
            hint = f" (see `bayes-eval {exc.ctx.info_name} --help`)" if exc.ctx else ""
            typer.echo(f"error: {where}{text}{hint}", err=True)
            sys.exit(exc.exit_code)
        except cx.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        if rv == _INTERRUPTED:  # typer's answer to Ctrl-C (KeyboardInterrupt -> Exit(130))
            typer.echo("error: interrupted", err=True)
        sys.exit(rv if isinstance(rv, int) else 0)


def _argv(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
    """The command-line arguments given to ``main`` (as click receives them)."""
    given = kwargs.get("args", args[0] if args else None)
    return [str(a) for a in (sys.argv[1:] if given is None else given)]


def _typed_option(argv: list[str], opts: list[str]) -> tuple[str, str] | None:
    """The last ``(flag as typed, value)`` of one of ``opts`` in ``argv`` (``-n 2.5`` or
    ``--n=2.5``), or None."""
    found = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        for opt in opts:
            if arg == opt and i + 1 < len(argv):
                found = (opt, argv[i + 1])
            elif opt.startswith("--") and arg.startswith(opt + "="):
                found = (opt, arg[len(opt) + 1 :])
            elif len(opt) == 2 and arg.startswith(opt) and not arg.startswith("--"):
                found = (opt, arg[2:])
    return found


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bayes-eval")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0.0.0+unknown"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"bayes-eval {_package_version()}")
        raise typer.Exit()


app = typer.Typer(
    cls=_OneLineErrors,
    name="bayes-eval",
    help="Label-efficient, honest Bayesian evaluation of deployed classifiers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_show_version,
            is_eager=True,
            help="Print the bayes-eval version and exit.",
        ),
    ] = False,
) -> None:
    """Label-efficient, honest Bayesian evaluation of deployed classifiers."""


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
            with warnings.catch_warnings():  # restores the hook afterwards
                warnings.showwarning = _show_warning
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


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """A warning as one ``warning:`` line on stderr (its class named), never the package's file
    and source line that Python's default format prints."""
    typer.echo(f"warning: {' '.join(str(message).split())} ({category.__name__})", err=True)


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, soft_wrap=True)


def _setup_matplotlib() -> None:
    os.environ.setdefault("MPLBACKEND", "Agg")


def _check_parent(path: Path, flag: str) -> None:
    """The directory that will hold ``path`` (given by ``flag``) exists and is writable."""
    parent = path.absolute().parent
    if not parent.is_dir():
        raise UserError(f"{flag} {str(path)!r}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise UserError(f"{flag} {str(path)!r}: directory {str(parent)!r} is not writable")


def _check_out_file(out: Path) -> None:
    """An --out path that can be written: not a directory, its directory exists and is writable."""
    if out.is_dir():
        raise UserError(
            f"--out {str(out)!r} is a directory; allowed: a file path such as batch.csv"
        )
    _check_parent(out, "--out")
    if out.exists() and not os.access(out, os.W_OK):
        raise UserError(f"--out {str(out)!r} is not writable")


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
    from ..report import package_versions

    return package_versions()
