"""Audit integrity (issue 16): the writer lock, no silent loss of acknowledged labels, ids kept
exactly as written, crash and power-loss safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import bayes_eval as be
from bayes_eval._lock import AuditLockedError
from bayes_eval.cli import app
from bayes_eval.ledger import COUNT_NAME, LEDGER_NAME, LedgerError, LedgerRepairWarning

runner = CliRunner()


def _cli(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(7)
    scores = rng.random(4000)
    truth = (rng.random(4000) < scores).astype(np.uint8)
    pop = be.Population(scores, threshold=0.5)
    strata = be.stratify(pop, n_strata=3)
    return pop, truth, strata


def _new_audit(small, path):
    pop, _, strata = small
    return be.Audit(pop, strata=strata, metric="f1", design="random", rng=3, draws=100, path=path)


def _fork(child):
    """Run ``child()`` in a forked process (bayes_eval already imported: fast); return its pid."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a multi-threaded process
        pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 0
        try:
            child()
        except BaseException:
            code = 3
        finally:
            os._exit(code)
    return pid


def _reopen(small, path, **kw):
    pop, _, strata = small
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LedgerRepairWarning)
        return be.Audit.open(path, pop, strata=strata, **kw)


# ---------------------------------------------------------------------- 1. the writer lock
def test_second_writer_is_refused_naming_the_holder(small, tmp_path):
    path = tmp_path / "a"
    a = _new_audit(small, path)
    a.propose(4)
    r, w = os.pipe()

    def child():
        os.close(r)
        try:
            _reopen(small, path)
        except AuditLockedError as exc:
            os.write(w, str(exc).encode())

    pid = _fork(child)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        msg = fh.read().decode()
    os.waitpid(pid, 0)
    assert f"locked by another writer (pid {os.getpid()})" in msg
    # a reader needs no lock, and sees the state; it cannot write
    ro = _reopen(small, path, read_only=True)
    assert ro.n_proposed == 4
    with pytest.raises(RuntimeError, match="read_only=True"):
        ro.propose(1)
    a.close()
    with pytest.raises(RuntimeError, match="closed"):
        a.propose(1)
    with _reopen(small, path) as b:  # released: a new writer may open it
        assert b.n_proposed == 4


def test_concurrent_writers_released_at_one_instant(small, tmp_path):
    path = tmp_path / "a"
    _new_audit(small, path).close()
    _, truth, _ = small
    go_r, go_w = os.pipe()
    results = []
    pids = []
    for _ in range(4):
        r, w = os.pipe()

        def child(r=r, w=w):
            os.close(r)
            os.read(go_r, 1)  # all released at one instant
            try:
                a = _reopen(small, path)
            except AuditLockedError:
                os.write(w, b"LOCKED")
                return
            ids = a.propose(5)
            a.record(ids, truth[ids])
            time.sleep(1.5)  # hold the lock while the others try
            os.write(w, b"OK")

        pids.append(_fork(child))
        os.close(w)
        results.append(r)
    os.write(go_w, b"xxxx")
    outcomes = []
    for r in results:
        with os.fdopen(r, "rb") as fh:
            outcomes.append(fh.read())
    for pid in pids:
        assert os.waitpid(pid, 0)[1] == 0
    assert sorted(outcomes) == [b"LOCKED", b"LOCKED", b"LOCKED", b"OK"]
    a = _reopen(small, path)
    assert a.n_proposed == 5 and a.n_labels == 5


def test_concurrent_cli_records_of_conflicting_labels(tmp_path):
    frame = pd.DataFrame({"id": np.arange(500), "p": np.linspace(0, 1, 500)})
    frame.to_csv(tmp_path / "s.csv", index=False)
    audit = tmp_path / "au"
    args = ("--score-col", "p", "--id-col", "id", "--threshold", "0.5", "--strata", "2")
    assert _cli("init", audit, "--scores", tmp_path / "s.csv", *args).exit_code == 0
    assert _cli("next", audit, "-n", "3", "--out", tmp_path / "b.csv").exit_code == 0
    first = pd.read_csv(tmp_path / "b.csv")["id"].iloc[0]
    for y in (0, 1):
        (tmp_path / f"l{y}.csv").write_text(f"id,label\n{first},{y}\n")
    go_r, go_w = os.pipe()
    outs, pids = [], []
    for y in (0, 1):
        r, w = os.pipe()

        def child(y=y, r=r, w=w):
            os.close(r)
            os.read(go_r, 1)
            res = _cli("record", audit, tmp_path / f"l{y}.csv")
            os.write(w, f"{res.exit_code}|{res.stderr.strip()}".encode())

        pids.append(_fork(child))
        os.close(w)
        outs.append(r)
    os.write(go_w, b"xx")
    got = []
    for r in outs:
        with os.fdopen(r, "rb") as fh:
            got.append(fh.read().decode())
    for pid in pids:
        os.waitpid(pid, 0)
    codes = sorted(g.split("|")[0] for g in got)
    assert codes == ["0", "1"], got
    err = next(g for g in got if g.startswith("1|"))
    assert "locked by another writer" in err or "conflicts with it" in err, err
    res = _cli("status", audit)  # still opens
    assert res.exit_code == 0, res.stderr
    assert "1 labels" in res.stdout


# ---------------------------------------------------------------------- 2. ledger integrity
@pytest.mark.parametrize("damage", ["delete", "empty", "flip_last", "stale_crc_last", "cut_lines"])
def test_damaged_ledger_never_opens_with_fewer_labels(small, tmp_path, damage):
    path = tmp_path / "a"
    _, truth, _ = small
    with _new_audit(small, path) as a:
        for _ in range(3):
            ids = a.propose(4)
            a.record(ids, truth[ids])
    ledger = path / LEDGER_NAME
    data = ledger.read_bytes()
    lines = data.splitlines(keepends=True)
    if damage == "delete":
        ledger.unlink()
    elif damage == "empty":
        ledger.write_bytes(b"")
    elif damage == "flip_last":
        last = bytearray(lines[-1])
        last[10] ^= 0x04
        ledger.write_bytes(b"".join(lines[:-1]) + bytes(last))
    elif damage == "stale_crc_last":
        ledger.write_bytes(
            b"".join(lines[:-1]) + lines[-1].replace(b'"label":0', b'"label":1', 1)
            if b'"label":0' in lines[-1]
            else b"".join(lines[:-1]) + lines[-1].replace(b'"label":1', b'"label":0', 1)
        )
    else:
        ledger.write_bytes(b"".join(lines[:-3]))
    before = sorted((p.name, p.read_bytes()) for p in path.iterdir())
    with pytest.raises(LedgerError):
        _reopen(small, path)
    with pytest.raises(LedgerError):
        _reopen(small, path, read_only=True)
    assert sorted((p.name, p.read_bytes()) for p in path.iterdir()) == before  # nothing re-created


def test_cli_status_on_deleted_ledger_is_an_error(tmp_path):
    frame = pd.DataFrame({"p": np.linspace(0, 1, 300)})
    frame.to_csv(tmp_path / "s.csv", index=False)
    audit = tmp_path / "au"
    assert _cli("init", audit, "--scores", tmp_path / "s.csv", "--score-col", "p",
                "--threshold", "0.5", "--strata", "2").exit_code == 0  # fmt: skip
    (audit / LEDGER_NAME).unlink()
    for cmd in (("status", audit), ("next", audit, "-n", "2")):
        res = _cli(*cmd)
        assert res.exit_code == 1 and "ledger" in res.stderr and "missing" in res.stderr
        assert not (audit / LEDGER_NAME).exists()


def test_torn_line_is_cut_and_announced(small, tmp_path):
    path = tmp_path / "a"
    with _new_audit(small, path) as a:
        a.propose(4)
    with open(path / LEDGER_NAME, "ab") as fh:
        fh.write(b'{"type":"label","id":1')
    pop, _, strata = small
    with pytest.warns(LedgerRepairWarning, match="torn last line"):
        b = be.Audit.open(path, pop, strata=strata)
    assert b.repaired_torn_line and b.n_proposed == 4
    b.close()


def test_interrupted_creation_is_restarted(small, tmp_path):
    path = tmp_path / "a"
    _new_audit(small, path).close()
    (path / "manifest.json").unlink()  # crash after the ledger, before the manifest
    with _new_audit(small, path) as a:
        assert a.n_proposed == 0


# ---------------------------------------------------------------------- crash and power loss
def test_acknowledged_labels_survive_50_random_kills(small, tmp_path):
    path = tmp_path / "a"
    _new_audit(small, path).close()
    _, truth, _ = small
    rng = np.random.default_rng(11)
    acked: dict[int, int] = {}
    kills = 0
    t0 = time.perf_counter()
    while kills < 50:
        r, w = os.pipe()

        def child(r=r, w=w):
            os.close(r)
            a = _reopen(small, path)
            while a.n_proposed + 3 <= a.population.size:
                ids = a.propose(3)
                a.record(ids, truth[ids])
                os.write(w, ("ACK " + " ".join(map(str, ids.tolist())) + "\n").encode())

        pid = _fork(child)
        os.close(w)
        fh = os.fdopen(r, "rb")
        first = fh.readline()
        assert first.startswith(b"ACK "), first
        time.sleep(float(rng.uniform(0.0, 0.03)))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        kills += 1
        complete = fh.read().split(b"\n")[:-1]  # the last piece lacks its newline
        for line in [first, *complete]:
            assert line.startswith(b"ACK ")
            for v in line.split()[1:]:
                acked[int(v)] = int(truth[int(v)])
        fh.close()
        a = _reopen(small, path)
        labels = a.labels()
        assert set(acked) <= set(labels.index.tolist())
        assert all(int(labels[i]) == y for i, y in acked.items())
        a.close()
    assert kills == 50 and len(acked) > 50
    assert time.perf_counter() - t0 < 60


@pytest.mark.parametrize("count_written", [False, True])
def test_power_loss_at_every_byte_of_the_last_write(small, tmp_path, count_written):
    """Truncating the ledger anywhere inside the last write never loses an acknowledged label
    and never opens silently with fewer labels than acknowledged."""
    path = tmp_path / "a"
    _, truth, _ = small
    with _new_audit(small, path) as a:
        ids = a.propose(6)
        a.record(ids[:3], truth[ids[:3]])
        size0 = (path / LEDGER_NAME).stat().st_size
        count0 = (path / COUNT_NAME).read_bytes()
        acked = a.labels()
        a.record(ids[3:], truth[ids[3:]])  # the last write: 3 label lines
    full = (path / LEDGER_NAME).read_bytes()
    count1 = (path / COUNT_NAME).read_bytes()
    opened = refused = 0
    for cut in range(size0, len(full)):
        (path / LEDGER_NAME).write_bytes(full[:cut])
        # the count is rewritten only after the ledger's fsync: a power loss inside the last
        # write leaves the previous count; count_written=True is the stronger case of lines
        # removed after the count was written
        (path / COUNT_NAME).write_bytes(count1 if count_written else count0)
        try:
            b = _reopen(small, path)
        except LedgerError as exc:
            assert count_written and "removed at the end" in str(exc)
            refused += 1
            continue
        got = b.labels()
        b.close()
        assert len(got) >= len(acked)
        assert got.loc[acked.index].tolist() == acked.tolist()
        opened += 1
    n = len(full) - size0
    assert (opened, refused) == ((n, 0) if not count_written else (0, n))


# a real (exec'd, not forked) writer process, killed three times
_CHILD = textwrap.dedent(
    """
    import sys, numpy as np, bayes_eval as be
    rng = np.random.default_rng(0)
    scores = rng.random(100_000); truth = rng.random(100_000) < scores
    pop = be.Population(scores, threshold=0.5)
    strata = be.stratify(pop, n_strata=3)
    audit = be.Audit(pop, strata=strata, metric="f1", design="random", rng=4, draws=200,
                     path=sys.argv[1])
    print("READY", flush=True)
    while audit.n_proposed + 5 <= pop.size:
        ids = audit.propose(5)
        audit.record(ids, truth[ids])
        print("ACK", " ".join(map(str, ids.tolist())), flush=True)
    """
)


def test_acknowledged_labels_survive_sigkill(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    path = tmp_path / "audit"
    rng = np.random.default_rng(0)
    # large enough that no child labels every item before it is killed (an exhausted audit
    # would make the later kills test nothing)
    scores = rng.random(100_000)
    truth = rng.random(100_000) < scores
    pop = be.Population(scores, threshold=0.5)
    acked: list[int] = []
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    for delay in rng.uniform(0.05, 0.6, size=3):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(path)], stdout=subprocess.PIPE, env=env
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(b"READY")
        # wait for the first acknowledged batch, so that the kill always has something to
        # lose, however slow the machine (no dependence on wall-clock speed)
        first = proc.stdout.readline()
        assert first.startswith(b"ACK ")
        acked.extend(int(v) for v in first.split()[1:])
        time.sleep(float(delay))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        for line in out.split(b"\n"):
            if line.startswith(b"ACK "):  # complete lines only
                acked.extend(int(v) for v in line.split()[1:])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LedgerRepairWarning)  # a torn line may be cut
            audit = be.Audit.open(path, pop)
        labels = audit.labels()
        assert set(acked) <= set(labels.index)
        assert all(labels[i] == truth[i] for i in acked)
        audit.close()
    assert len(acked) > 0


# ---------------------------------------------------------------------- 3. ids exactly
def test_big_integer_ids_are_refused_not_wrapped():
    big = np.array([1, 2**63 + 5], dtype=np.uint64)
    with pytest.raises(ValueError, match=r"9223372036854775813.*64-bit"):
        be.Population([0.1, 0.9], threshold=0.5, ids=big)
    with pytest.raises(ValueError, match=str(2**64)):
        be.Population([0.1, 0.9], threshold=0.5, ids=[1, 2**64])
    ok = be.Population([0.1, 0.9], threshold=0.5, ids=np.array([1, 2**63 - 1], dtype=np.uint64))
    assert ok.ids.tolist() == [1, 2**63 - 1]
    with pytest.raises(ValueError, match="64-bit"):
        ok.positions_of(np.array([2**63 + 1], dtype=np.uint64))


def test_every_id_is_type_checked_and_fingerprint_is_unambiguous():
    ids = [f"x{i}" for i in range(1500)] + [7]
    with pytest.raises(TypeError, match=r"\['int', 'str'\].*e\.g\. 7"):
        be.Population(np.linspace(0, 1, 1501), threshold=0.5, ids=ids)
    a = be.Population([0.1, 0.2], threshold=0.5, ids=["a\0b", "c"])
    b = be.Population([0.1, 0.2], threshold=0.5, ids=["a", "b\0c"])
    assert a.fingerprint() != b.fingerprint()
    # ids without NUL keep the fingerprint of earlier releases (old audits still open)
    import hashlib

    c = be.Population([0.1, 0.2], threshold=0.5, ids=["a", "b"])
    h = hashlib.sha256()
    h.update(np.asarray([0.1, 0.2]).view(np.uint8))
    h.update(np.packbits([False, False]).tobytes())
    h.update(b"a\0b")
    assert c.fingerprint() == h.hexdigest()


def test_csv_ids_are_kept_exactly_as_written(tmp_path):
    n = 200
    ids = [f"{i:06d}" for i in range(n)]  # zero padded: strings
    pd.DataFrame({"id": ids, "p": np.linspace(0, 1, n)}).to_csv(tmp_path / "z.csv", index=False)
    audit = tmp_path / "au"
    args = ("--score-col", "p", "--id-col", "id", "--threshold", "0.5", "--strata", "2")
    assert _cli("init", audit, "--scores", tmp_path / "z.csv", *args).exit_code == 0
    res = _cli("next", audit, "-n", "4", "--out", tmp_path / "b.csv")
    assert res.exit_code == 0, res.stderr
    batch = pd.read_csv(tmp_path / "b.csv", dtype=str)
    assert all(len(v) == 6 and v in ids for v in batch["id"])
    # a big id above int64 stays a string too
    big = [str(2**63 + i) for i in range(n)]
    pd.DataFrame({"id": big, "p": np.linspace(0, 1, n)}).to_csv(tmp_path / "g.csv", index=False)
    assert _cli("init", tmp_path / "g", "--scores", tmp_path / "g.csv", *args).exit_code == 0
    res = _cli("next", tmp_path / "g", "-n", "3")
    assert res.exit_code == 0
    assert set(pd.read_csv(__import__("io").StringIO(res.stdout), dtype=str)["id"]) <= set(big)


@pytest.mark.parametrize("written", ["793e0", "793.0", "0793", "+793", " 793x", " 793", "793 "])
def test_labels_file_ids_match_exactly(tmp_path, written):
    pd.DataFrame({"id": np.arange(1000), "p": np.linspace(0, 1, 1000)}).to_csv(
        tmp_path / "s.csv", index=False
    )
    audit = tmp_path / "au"
    args = ("--score-col", "p", "--id-col", "id", "--threshold", "0.5", "--strata", "2")
    assert _cli("init", audit, "--scores", tmp_path / "s.csv", *args).exit_code == 0
    (tmp_path / "l.csv").write_text(f"id,label\n{written},1\n")
    before = (audit / LEDGER_NAME).read_bytes()
    res = _cli("record", audit, tmp_path / "l.csv")
    # the id is quoted exactly as written: never trimmed (session 32; " 793" was taken as 793)
    assert res.exit_code == 1 and repr(written) in res.stderr, res.stderr
    assert (audit / LEDGER_NAME).read_bytes() == before


# ---------------------------------------------------------------------- 4. next
def test_next_out_into_a_directory_proposes_nothing_and_pending_reexports(tmp_path):
    pd.DataFrame({"p": np.linspace(0, 1, 300)}).to_csv(tmp_path / "s.csv", index=False)
    audit = tmp_path / "au"
    assert _cli("init", audit, "--scores", tmp_path / "s.csv", "--score-col", "p",
                "--threshold", "0.5", "--strata", "2").exit_code == 0  # fmt: skip
    before = (audit / LEDGER_NAME).read_bytes()
    res = _cli("next", audit, "-n", "3", "--out", tmp_path)
    assert res.exit_code == 1 and "is a directory" in res.stderr
    assert (audit / LEDGER_NAME).read_bytes() == before
    assert _cli("next", audit, "-n", "3", "--out", tmp_path / "b.csv").exit_code == 0
    res = _cli("next", audit, "--pending", "--out", tmp_path / "p.csv")
    assert res.exit_code == 0, res.stderr
    assert pd.read_csv(tmp_path / "p.csv").equals(pd.read_csv(tmp_path / "b.csv"))


# ---------------------------------------------------------------------- 5. bounds
@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("pair-recall", "--size-1", "10", "--size-2", "10", "--size-12", "5", "--labels-1",
          "3/5", "--labels-2", "3/5", "--labels-12", "2/5", "--draws", "1000000000"),
         r"--draws 1000000000 is out of range; allowed: 1 to 10,000,000"),
        (("init", "AUD", "--scores", "S", "--score-col", "p", "--threshold", "0.5",
          "--strata", "100000000000"), r"--strata 100000000000 is out of range"),
        (("certify", "AUD", "--n-sims", "99999999"), r"--n-sims 99999999 is out of range"),
        (("next", "AUD", "-n", "5000000000"), r"-n 5000000000 is too large"),
    ],
)  # fmt: skip
def test_huge_sizes_are_refused_in_one_line(tmp_path, args, match):
    pd.DataFrame({"p": np.linspace(0, 1, 50)}).to_csv(tmp_path / "s.csv", index=False)
    args = [str(tmp_path / "au") if a == "AUD" else str(tmp_path / "s.csv") if a == "S" else a
            for a in args]  # fmt: skip
    res = _cli(*args)
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    import re

    assert re.search(match, lines[0]), lines[0]


def test_memory_error_is_one_line(monkeypatch, tmp_path):
    import bayes_eval.cli._pair_recall as pair_recall_cmd

    def boom(*a, **k):
        raise MemoryError

    monkeypatch.setattr(pair_recall_cmd, "_parse_hn", boom)
    res = _cli("pair-recall", "--size-1", "10", "--size-2", "10", "--size-12", "5",
               "--labels-1", "3/5")  # fmt: skip
    assert res.exit_code == 1
    assert res.stderr.strip().splitlines() == [
        "error: out of memory; use smaller sizes (--draws, --n-sims, -n, --strata) or a machine "
        "with more memory"
    ]
