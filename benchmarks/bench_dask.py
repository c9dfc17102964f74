"""Benchmark: in-memory vs Dask populations on partitioned Parquet (issue 8).

For N = 10^7 and 10^8 synthetic scores written as Parquet files to /tmp, measures for each path
the wall time and peak memory of

    init (read / scan) + stratify (equal_size, 10 strata per side) + the first reservoir pass
    + 50 batches of 20 proposals (allocated proportionally to N_k, largest remainder)

Each path runs in its own subprocess so that its peak RSS (``resource.getrusage``) is its own:

* ``memory``: ``read_parquet(engine="memory")`` (a ``Population``), ``stratify``, the in-memory
  ``KeyedStratumSampler``;
* ``dask-cluster``: ``engine="dask"`` with a ``distributed.LocalCluster`` of 2 worker processes
  (1 thread each): the *driver* peak RSS is the client process's; the workers' peak RSS is
  reported separately (``client.run`` of ``getrusage`` on each worker);
* ``dask-threads``: ``engine="dask"`` on Dask's default threaded scheduler, tasks running inside
  the driver process (so its peak RSS includes the in-flight pieces).

Usage: ``uv run python benchmarks/bench_dask.py [--sizes 1e7 1e8] [--dir /tmp/bench_dask]``.
The output is committed as ``benchmarks/results/bench_dask.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROWS_PER_FILE = 2_000_000
ROW_GROUP = 1_000_000
BATCHES = 50
BATCH_SIZE = 20
SEED = 2026


def make_dataset(n: int, root: Path) -> Path:
    """Write n rows (id int64, score float64) in files of ROWS_PER_FILE rows; idempotent."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = root / f"n{n}"
    done = d / "_DONE"
    if done.exists():
        return d
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i, start in enumerate(range(0, n, ROWS_PER_FILE)):
        m = min(ROWS_PER_FILE, n - start)
        # a realistic classifier: 10% positives with Beta(5, 2) scores, the rest Beta(1, 6)
        pos = rng.random(m) < 0.1
        score = np.where(pos, rng.beta(5, 2, m), rng.beta(1, 6, m))
        ids = np.arange(start, start + m, dtype=np.int64) * 7 + 3  # sparse, increasing ids
        pq.write_table(
            pa.table({"id": ids, "score": score}),
            d / f"part-{i:05d}.parquet",
            row_group_size=ROW_GROUP,
        )
    done.write_text("ok")
    return d


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run_path(path: str, data: Path) -> dict:
    """One measured run (inside the subprocess)."""
    import bayes_eval as be
    from bayes_eval._sampler import make_sampler
    from bayes_eval.designs import largest_remainder
    from bayes_eval.parquet import read_parquet

    client = cluster = None
    out: dict = {"path": path}
    ti = time.perf_counter()
    if path != "memory":  # one-off import cost, reported apart (it does not grow with N)
        import dask.dataframe  # noqa: F401
        import distributed  # noqa: F401

        import bayes_eval.dask
    if path == "dask-cluster":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            memory_limit="6GB",
        )
        client = Client(cluster)
        client.run(lambda: __import__("bayes_eval.dask"))  # warm the workers
    out["import"] = time.perf_counter() - ti  # imports (+ cluster start): one-off, not timed
    t0 = time.perf_counter()
    engine = "memory" if path == "memory" else "dask"
    pop = read_parquet(
        data, score_col="score", id_col="id", threshold=0.5, engine=engine, client=client
    )
    t1 = time.perf_counter()
    if engine == "dask":
        strata = pop.stratify_lazy(method="equal_size", n_strata=10)
    else:
        strata = be.stratify(pop, method="equal_size", n_strata=10)
    t2 = time.perf_counter()
    sampler = make_sampler(strata, SEED)
    alloc = largest_remainder(strata.sizes.astype(float), BATCH_SIZE, strata.sizes)
    # first reservoir pass: for the Dask sampler one pass over the data; the in-memory sampler
    # builds each stratum's queue on the first draw from it, so the first batch touches all
    for k in range(strata.n_strata):
        sampler.draw(k, 1)
    t3 = time.perf_counter()
    per_batch = []
    proposals = []
    for _ in range(BATCHES):
        tb = time.perf_counter()
        batch = [sampler.draw(k, int(m)) for k, m in enumerate(alloc) if m]
        per_batch.append(time.perf_counter() - tb)
        proposals.append(np.concatenate(batch))
    t4 = time.perf_counter()
    ids = np.concatenate(proposals)
    out.update(
        N=int(pop.size),
        K=int(strata.n_strata),
        init=t1 - t0,
        stratify=t2 - t1,
        first_pass=t3 - t2,
        batches=t4 - t3,
        total=t4 - t0,
        batch_median_ms=1e3 * float(np.median(per_batch)),
        batch_max_ms=1e3 * float(np.max(per_batch)),
        sizes=strata.sizes.tolist(),
        proposals_hash=int(np.bitwise_xor.reduce(ids.astype(np.int64) * 2654435761 % (1 << 61))),
        passes=getattr(sampler, "passes", None),
        driver_peak_mb=_peak_mb(),
    )
    if client is not None:
        peaks = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)
        out["worker_peak_mb"] = max(peaks.values())
        client.close()
        cluster.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", nargs="+", type=float, default=[1e7, 1e8])
    ap.add_argument("--dir", default="/tmp/bench_dask")
    ap.add_argument("--paths", nargs="+", default=["memory", "dask-cluster", "dask-threads"])
    ap.add_argument("--child", nargs=2, metavar=("PATH", "DATA"))
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(run_path(args.child[0], Path(args.child[1]))))
        return
    root = Path(args.dir)
    rows = []
    for n in (int(s) for s in args.sizes):
        tm = time.perf_counter()
        data = make_dataset(n, root)
        print(
            f"# dataset N={n:.0e}: {data} ({len(list(data.glob('*.parquet')))} files, "
            f"{sum(f.stat().st_size for f in data.glob('*.parquet')) / 1e9:.2f} GB, "
            f"ready in {time.perf_counter() - tm:.0f} s)",
            flush=True,
        )
        for path in args.paths:
            proc = subprocess.run(
                [sys.executable, __file__, "--child", path, str(data)],
                capture_output=True,
                text=True,
                env=os.environ.copy(),
            )
            line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
            if proc.returncode != 0 or not line:
                print(
                    f"# {path} N={n:.0e} FAILED rc={proc.returncode}: {proc.stderr[-2000:]}",
                    flush=True,
                )
                continue
            res = json.loads(line[0][7:])
            rows.append(res)
            print("# " + json.dumps(res), flush=True)
    print()
    hdr = (
        f"{'N':>6} {'path':<13} {'init s':>7} {'strat s':>7} {'pass1 s':>7} {'50 batch s':>10}"
        f" {'total s':>8} {'x mem':>6} {'batch ms':>9} {'driver MB':>9} {'workers MB':>10}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        base = next((b for b in rows if b["N"] == r["N"] and b["path"] == "memory"), None)
        ratio = r["total"] / base["total"] if base else float("nan")
        print(
            f"{r['N']:>6.0e} {r['path']:<13} {r['init']:>7.1f} {r['stratify']:>7.1f} "
            f"{r['first_pass']:>7.1f} {r['batches']:>10.3f} {r['total']:>8.1f} {ratio:>6.2f} "
            f"{r['batch_median_ms']:>9.2f} {r['driver_peak_mb']:>9.0f} "
            f"{r.get('worker_peak_mb', float('nan')):>10.0f}"
        )
    same = {}
    for r in rows:
        same.setdefault(r["N"], set()).add((tuple(r["sizes"]), r["proposals_hash"]))
    for n, s in same.items():
        print(f"N={n:.0e}: N_k and the 1000 proposals identical across paths: {len(s) == 1}")


if __name__ == "__main__":
    main()
