"""CLI cost per command on a large population (issues 16 and 18): wall time and peak memory of
``next``, ``record`` and ``status`` in a fresh process each, as a user runs them.

Run: ``uv run python benchmarks/bench_cli.py [N] [--baseline SRC]`` (default N = 10_000_000 rows
with integer ids). Each command runs in a fresh process measured with ``/usr/bin/time``. The
audit directory keeps the population, its strata and the sampling order as memory-mapped arrays
written at ``init``; the rows "no stored arrays" delete them first, so the command reads the
population file, re-stratifies and writes them again (what the first writer command does on an
audit directory made by an older release).

``--baseline SRC`` also runs the same commands with the package at ``SRC`` (e.g. a
``git archive HEAD`` of the previous release unpacked there) in the same run, alternating with the
current code, and prints the ratio current / baseline per command.

``--status-only [--runs R] [--baseline-note TEXT]`` (issue 18: ``status`` start-up <= 1.5 s)
makes the audit (``init``, three rounds of ``next -n 20`` / ``record``: 60 labels) and then
times ``status`` only: ``R`` fresh processes of the current code, alternating with the
baseline's when ``--baseline`` is given, reporting medians and the median of the pair-by-pair
ratios. It rewrites only the ``status`` section of the results file; the table of the full run
is kept as it is (and the full run keeps the ``status`` section).

Bytecode: the commands run with ``PYTHONPYCACHEPREFIX`` set to a temporary directory (filled by a
warm-up run), so imports are timed from compiled bytecode as in an installed package, even where
the environment sets ``PYTHONDONTWRITEBYTECODE``.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

CMD = [sys.executable, "-c", "import sys; from bayes_eval.cli import app; app(sys.argv[1:])"]
STORE = "population"
OLD_CACHE = ("population_cache.npz", "population_cache.json")
RESULTS = Path(__file__).parent / "results" / "bench_cli.txt"
#: first line of the ``--status-only`` section of the results file
STATUS_MARK = "status start-up (issue 18)"
#: first line of the ``--models`` section (kept at the top of the results file)
MODELS_MARK = "by model (--model)"


def _env(src: Path | None, pycache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    env["BENCH_CWD"] = str(pycache.parent)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    return env


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    t0 = time.perf_counter()
    res = subprocess.run(
        ["/usr/bin/time", "-f", "MAXRSS %M", *CMD, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=env["BENCH_CWD"],  # not the source tree: `python -c` puts the cwd first on sys.path
    )
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{args[0]} failed: {res.stderr}")
    rss = next(int(x.split()[1]) for x in res.stderr.splitlines() if x.startswith("MAXRSS"))
    return wall, rss / 1024


def _labels_from_batch(batch: Path, out: Path) -> None:
    with batch.open() as fh, out.open("w", newline="") as oh:
        w = csv.writer(oh)
        w.writerow(["id", "label"])
        for row in csv.DictReader(fh):
            w.writerow([row["id"], int(float(row["score"]) > 0.4)])


def _init(
    audit: Path, csv_file: Path, env: dict[str, str], model: str | None = None
) -> tuple[float, float]:
    shutil.rmtree(audit, ignore_errors=True)
    return timed(
        ["init", str(audit), "--scores", str(csv_file), "--score-col", "p", "--id-col", "id",
         "--threshold", "0.5", "--strata", "10", "--design", "proportional",
         *(["--model", model] if model else [])],
        env,
    )  # fmt: skip


def run_commands(
    tmp: Path,
    csv_file: Path,
    env: dict[str, str],
    tag: str,
    *,
    rounds: tuple = (),
    model: str | None = None,
    history: int = 0,
) -> list[tuple]:
    """``init`` (with ``--model model`` when given), then ``next``/``record`` per round
    (``(label, drop the stored arrays)``) and ``status``; the rows (command, wall s, peak MB)."""
    audit = tmp / f"audit_{tag}"
    rows = [("init (parse, hash, store)", *_init(audit, csv_file, env, model))]
    if history:  # earlier batches, made in one process (not timed): a long-running audit
        subprocess.run(
            [sys.executable, "-c", _HISTORY, str(audit), str(history)],
            env=env, cwd=env["BENCH_CWD"], check=True, capture_output=True,
        )  # fmt: skip
    batch, labels = tmp / f"b_{tag}.csv", tmp / f"l_{tag}.csv"
    rounds = rounds or (("no stored arrays", True), ("stored", False), ("stored", False))
    for label, drop in rounds:
        for command in ("next", "record"):
            if drop:
                shutil.rmtree(audit / STORE, ignore_errors=True)
                for f in OLD_CACHE:
                    (audit / f).unlink(missing_ok=True)
            if command == "next":
                args = ["next", str(audit), "-n", "20", "--out", str(batch)]
            else:
                _labels_from_batch(batch, labels)
                args = ["record", str(audit), str(labels)]
            wall, rss = timed(args, env)
            size = "-n 20" if command == "next" else "20"
            rows.append((f"{command} {size} ({label})", wall, rss))
    wall, rss = timed(["status", str(audit)], env)
    rows.append(("status (stored, no lock)", wall, rss))
    return rows


#: ``history`` rounds of ``next -n 20`` / ``record`` in one process, as the CLI makes them
_HISTORY = """
import sys
from pathlib import Path
from bayes_eval.cli._directory import _open
opened = _open(Path(sys.argv[1]), write=True)
audit, pop = opened.audit, opened.population
for _ in range(int(sys.argv[2])):
    ids = audit.propose(20)
    audit.record(ids, pop.scores_at(pop.positions_of(ids)) > 0.4)
audit.close()
"""


def status_runs(audit: Path, envs: dict[str, dict[str, str]], runs: int) -> dict[str, list]:
    """``runs`` fresh ``status`` processes per code version, alternating (A B A B ...) so that
    a drift of the shared machine's speed hits both alike; one warm-up each, not counted."""
    out: dict[str, list] = {tag: [] for tag in envs}
    for i in range(runs + 1):
        for tag, env in envs.items():
            wall, rss = timed(["status", str(audit)], env)
            if i:
                out[tag].append((wall, rss))
    return out


def _status_row(tag: str, runs: list) -> str:
    walls = [w for w, _ in runs]
    spread = f"({min(walls):.2f}-{max(walls):.2f})"
    peak = statistics.median(r for _, r in runs)
    return f"{tag:10s} {statistics.median(walls):14.2f} {spread:>14s} {peak:8.0f}"


def status_section(n: int, size_mb: float, runs: dict[str, list], note: str) -> list[str]:
    """The ``--status-only`` section: medians (min-max) and the median pair-by-pair ratio."""
    lines = [
        f"{STATUS_MARK}: `status AUDIT` on N={n:,} rows (CSV {size_mb:,.0f} MB), 60 labels in "
        f"20 strata, 40,000 draws; {len(runs['current'])} fresh processes per code version "
        f"after one warm-up, alternating; {os.cpu_count()} cores shared, bytecode compiled",
        f"{'code':10s} {'wall s median':>14s} {'(min-max)':>14s} {'peak MB':>8s}",
        *(_status_row(tag, r) for tag, r in runs.items()),
    ]
    if "baseline" in runs:
        pairs = zip(runs["current"], runs["baseline"], strict=True)
        ratios = [a[0] / b[0] for a, b in pairs]
        lines.append(
            f"ratio current / baseline wall, median of the pairs: {statistics.median(ratios):.2f} "
            f"({min(ratios):.2f}-{max(ratios):.2f}); baseline = {note or 'the --baseline code'}"
        )
    return lines


def models_section(
    n: int, size_mb: float, results: dict[str, list], note: str, history: int = 0
) -> list[str]:
    """The ``--models`` section: the same commands for every model, in the same run."""
    history = f", after {history} earlier batches of 20 (not timed)" if history else ""
    tags = list(results)
    lines = [
        f"{MODELS_MARK}: bayes-eval CLI on N={n:,} rows (CSV {size_mb:,.0f} MB, integer ids), "
        f"`init --model M`, 10 strata per side, design proportional{history}; "
        f"{os.cpu_count()} cores shared; one fresh process per command; bytecode compiled; "
        "numba kernels cached; wall s and peak MB",
        f"{'command':32s}" + "".join(f" {t[:14]:>14s} {'MB':>6s}" for t in tags),
    ]
    for i, row in enumerate(results[tags[0]]):
        line = f"{row[0]:32s}"
        for t in tags:
            _, wall, rss = results[t][i]
            line += f" {wall:14.2f} {rss:6.0f}"
        lines.append(line)
    if note:
        lines.append(note)
    return lines


def _write(main_lines: list[str] | None, status_lines: list[str] | None) -> str:
    """Rewrite one section of the results file and keep the other."""
    old = RESULTS.read_text() if RESULTS.exists() else ""
    models = ""
    while old.startswith(MODELS_MARK):  # the by-model sections stay first, unchanged
        section, _, old = old.partition("\n\n")
        models += section + "\n\n"
    head, mark, tail = old.partition(STATUS_MARK)
    kept_main = head.rstrip("\n").splitlines()
    kept_status = (mark + tail).rstrip("\n").splitlines() if mark else []
    lines = (main_lines if main_lines is not None else kept_main) + [""]
    lines += status_lines if status_lines is not None else kept_status
    text = models + "\n".join(lines).strip("\n") + "\n"
    RESULTS.write_text(text)
    return text


def _write_models(lines: list[str], keep_models: bool = False) -> str:
    """Put the by-model section first and keep everything else of the results file (also the
    previous by-model section when ``keep_models``: a ``--history`` run adds to it)."""
    old = RESULTS.read_text() if RESULTS.exists() else ""
    if old.startswith(MODELS_MARK) and not keep_models:  # replace the previous section
        old = old.split("\n\n", 1)[1] if "\n\n" in old else ""
    text = "\n".join(lines) + "\n\n" + old
    RESULTS.write_text(text)
    return text


def _population(tmp: Path, n: int) -> Path:
    rng = np.random.default_rng(0)
    scores = rng.beta(0.6, 2.0, size=n)
    csv_file = tmp / "scores.csv"
    pd.DataFrame({"id": np.arange(n, dtype=np.int64) * 7 + 3, "p": scores}).to_csv(
        csv_file, index=False, float_format="%.6f"
    )
    return csv_file


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", type=int, nargs="?", default=10_000_000)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--status-only", action="store_true")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline-note", default="", help="What the baseline code is.")
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        help="With --models: batches of 20 proposed and recorded (in one process, not timed) "
        "after init, before the timed commands: the cost late in an audit.",
    )
    parser.add_argument(
        "--models",
        default="",
        help="Comma-separated models (e.g. independent,pooled): run the commands once per "
        "model (`init --model M`) in the same run and write the by-model section only; a "
        "model written NAME@SRC runs with the package at SRC (e.g. a patched tree).",
    )
    args = parser.parse_args()
    n = args.n
    tmp = Path(tempfile.mkdtemp(prefix="bench_cli_"))
    try:
        csv_file = _population(tmp, n)
        size_mb = csv_file.stat().st_size / 1e6
        envs = {"current": _env(None, tmp / "pyc_current")}
        if args.baseline is not None:
            envs["baseline"] = _env(args.baseline.resolve(), tmp / "pyc_baseline")
        for env in envs.values():  # compile the bytecode once (not timed)
            subprocess.run(
                [*CMD, "--help"], capture_output=True, env=env, check=True, cwd=env["BENCH_CWD"]
            )
        if args.models:
            results = {}
            rounds = (("stored", False),) * 2 if args.history else ()
            for spec in args.models.split(","):
                model, _, src = spec.partition("@")
                env = _env(Path(src).resolve() if src else None, tmp / f"pyc_{len(results)}")
                subprocess.run(
                    [*CMD, "--help"], capture_output=True, env=env, check=True,
                    cwd=env["BENCH_CWD"],
                )  # fmt: skip
                tag = f"{len(results)}"
                results[spec if not src else f"{model}*"] = run_commands(
                    tmp, csv_file, env, tag, model=model, history=args.history, rounds=rounds
                )
            note = args.baseline_note
            section = models_section(n, size_mb, results, note, args.history)
            print(_write_models(section, keep_models=bool(args.history)))
            return
        if args.status_only:
            stored = (("stored", False),) * 3
            run_commands(tmp, csv_file, envs["current"], "current", rounds=stored)
            runs = status_runs(tmp / "audit_current", envs, args.runs)
            print(_write(None, status_section(n, size_mb, runs, args.baseline_note)))
            return
        results = {tag: run_commands(tmp, csv_file, env, tag) for tag, env in envs.items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cur = results["current"]
    head = f"{'command':32s} {'wall s':>8s} {'peak MB':>8s}"
    if "baseline" in results:
        head += f" {'base s':>8s} {'base MB':>8s} {'s ratio':>8s}"
    lines = [
        f"bayes-eval CLI on N={n:,} rows (CSV {size_mb:,.0f} MB, integer ids), "
        f"{os.cpu_count()} cores shared; one fresh process per command; bytecode compiled",
        head,
    ]
    for i, (name, wall, rss) in enumerate(cur):
        line = f"{name:32s} {wall:8.2f} {rss:8.0f}"
        if "baseline" in results:
            _, bw, br = results["baseline"][i]
            line += f" {bw:8.2f} {br:8.0f} {wall / bw:8.2f}"
        lines.append(line)
    if "baseline" in results:
        lines.append(
            "baseline = the previous release's code (its population cache instead of stored "
            "arrays); ratio = current / baseline wall time"
        )
    print(_write(lines, None))


if __name__ == "__main__":
    main()
