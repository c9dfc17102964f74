"""CLI cost per command on a large population (issue 16): wall time and peak memory of
``next`` and ``record`` with and without the population cache in the audit directory.

Run: ``uv run python benchmarks/bench_cli.py [N]`` (default N = 10_000_000 rows with integer ids).
Each command runs in a fresh process (as a user would run it), measured with /usr/bin/time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

CMD = [sys.executable, "-c", "import sys; from bayes_eval.cli import app; app(sys.argv[1:])"]


def timed(args: list[str]) -> tuple[float, float, str]:
    t0 = time.perf_counter()
    res = subprocess.run(
        ["/usr/bin/time", "-f", "MAXRSS %M", *CMD, *args], capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{args[0]} failed: {res.stderr}")
    rss = next(int(x.split()[1]) for x in res.stderr.splitlines() if x.startswith("MAXRSS"))
    return wall, rss / 1024, res.stdout


def main(n: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench_cli_"))
    rng = np.random.default_rng(0)
    scores = rng.beta(0.6, 2.0, size=n)
    csv = tmp / "scores.csv"
    pd.DataFrame({"id": np.arange(n, dtype=np.int64) * 7 + 3, "p": scores}).to_csv(
        csv, index=False, float_format="%.6f"
    )
    size_mb = csv.stat().st_size / 1e6
    audit = tmp / "audit"
    rows = []
    wall, rss, _ = timed(
        ["init", str(audit), "--scores", str(csv), "--score-col", "p", "--id-col", "id",
         "--threshold", "0.5", "--strata", "10", "--design", "proportional"]
    )  # fmt: skip
    rows.append(("init (parse, hash, cache)", wall, rss))
    for label, drop_cache in (("no cache", True), ("cached", False)):
        for i in range(2):
            if drop_cache:
                for f in ("population_cache.npz", "population_cache.json"):
                    (audit / f).unlink(missing_ok=True)
            wall, rss, out = timed(["next", str(audit), "-n", "20", "--out", str(tmp / "b.csv")])
            rows.append((f"next -n 20 ({label}, {i + 1})", wall, rss))
            batch = pd.read_csv(tmp / "b.csv")
            pd.DataFrame({"id": batch["id"], "label": (batch["score"] > 0.4).astype(int)}).to_csv(
                tmp / "l.csv", index=False
            )
            if drop_cache:
                for f in ("population_cache.npz", "population_cache.json"):
                    (audit / f).unlink(missing_ok=True)
            wall, rss, _ = timed(["record", str(audit), str(tmp / "l.csv")])
            rows.append((f"record 20 ({label}, {i + 1})", wall, rss))
    wall, rss, _ = timed(["status", str(audit)])
    rows.append(("status (cached, no lock)", wall, rss))
    lines = [
        f"bayes-eval CLI on N={n:,} rows (CSV {size_mb:,.0f} MB, integer ids), "
        f"{os.cpu_count()} cores; one fresh process per command",
        f"{'command':38s} {'wall s':>8s} {'peak MB':>9s}",
    ]
    lines += [f"{name:38s} {w:8.2f} {r:9.0f}" for name, w, r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(__file__).parent / "results" / "bench_cli.txt"
    out.write_text(text)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000)
