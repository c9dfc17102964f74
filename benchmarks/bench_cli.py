"""CLI cost per command on a large population (issue 16): wall time and peak memory of ``next`` and
``record`` in a fresh process each, as a user runs them.

Run: ``uv run python benchmarks/bench_cli.py [N] [--baseline SRC]`` (default N = 10_000_000 rows
with integer ids). Each command runs in a fresh process measured with ``/usr/bin/time``. The
audit directory keeps the population, its strata and the sampling order as memory-mapped arrays
written at ``init``; the rows "no stored arrays" delete them first, so the command reads the
population file, re-stratifies and writes them again (what the first writer command does on an
audit directory made by an older release).

``--baseline SRC`` also runs the same commands with the package at ``SRC`` (e.g. a
``git archive HEAD`` of the previous release unpacked there) in the same run, alternating with the
current code, and prints the ratio current / baseline per command.

Bytecode: the commands run with ``PYTHONPYCACHEPREFIX`` set to a temporary directory (filled by a
warm-up run), so imports are timed from compiled bytecode as in an installed package, even where
the environment sets ``PYTHONDONTWRITEBYTECODE``.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
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


def run_commands(tmp: Path, csv_file: Path, env: dict[str, str], tag: str) -> list[tuple]:
    audit = tmp / f"audit_{tag}"
    shutil.rmtree(audit, ignore_errors=True)
    rows = []
    wall, rss = timed(
        ["init", str(audit), "--scores", str(csv_file), "--score-col", "p", "--id-col", "id",
         "--threshold", "0.5", "--strata", "10", "--design", "proportional"],
        env,
    )  # fmt: skip
    rows.append(("init (parse, hash, store)", wall, rss))
    batch, labels = tmp / f"b_{tag}.csv", tmp / f"l_{tag}.csv"
    for label, drop in (("no stored arrays", True), ("stored", False), ("stored", False)):
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", type=int, nargs="?", default=10_000_000)
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()
    n = args.n
    tmp = Path(tempfile.mkdtemp(prefix="bench_cli_"))
    try:
        rng = np.random.default_rng(0)
        scores = rng.beta(0.6, 2.0, size=n)
        csv_file = tmp / "scores.csv"
        pd.DataFrame({"id": np.arange(n, dtype=np.int64) * 7 + 3, "p": scores}).to_csv(
            csv_file, index=False, float_format="%.6f"
        )
        size_mb = csv_file.stat().st_size / 1e6
        envs = {"current": _env(None, tmp / "pyc_current")}
        if args.baseline is not None:
            envs["baseline"] = _env(args.baseline.resolve(), tmp / "pyc_baseline")
        for env in envs.values():  # compile the bytecode once (not timed)
            subprocess.run(
                [*CMD, "--help"], capture_output=True, env=env, check=True, cwd=env["BENCH_CWD"]
            )
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
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(__file__).parent / "results" / "bench_cli.txt"
    out.write_text(text)


if __name__ == "__main__":
    main()
