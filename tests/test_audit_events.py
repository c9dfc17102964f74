"""The pre-registered claim and the logged looks of an audit (issue 18's records): durable in the
ledger, integrity-checked like labels, loggable by a reader, refused when malformed."""

from __future__ import annotations

import json
import os
import warnings

import numpy as np
import pytest

import bayes_eval as be
from bayes_eval._lock import AuditLockedError
from bayes_eval.audit import Claim, LookRecord
from bayes_eval.ledger import (
    COUNT_NAME,
    LEDGER_NAME,
    LedgerError,
    LedgerRepairWarning,
    encode_line,
)


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(11)
    scores = rng.random(3000)
    truth = (rng.random(3000) < scores).astype(np.uint8)
    pop = be.Population(scores, threshold=0.5)
    return pop, truth, be.stratify(pop, n_strata=3)


def _new(small, path):
    pop, _, strata = small
    return be.Audit(pop, strata=strata, metric="f1", design="random", rng=5, draws=50, path=path)


def _reopen(small, path, **kw):
    pop, _, strata = small
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LedgerRepairWarning)
        return be.Audit.open(path, pop, strata=strata, **kw)


SEQ_CRC = ("seq", "crc")
CLAIM = Claim("f1", 0.7, 0.95, batch_size=10, budget=500)


def test_claim_and_looks_survive_reopen_and_do_not_change_labels(small, tmp_path):
    path = tmp_path / "a"
    _, truth, _ = small
    with _new(small, path) as a:
        assert a.claim is None and a.looks_logged == ()
        a.register_claim(CLAIM)
        ids = a.propose(10)
        a.log_look(LookRecord("status", a.n_labels))
        a.record(ids, truth[ids])
        a.log_look(LookRecord("certify", a.n_labels, "f1", 0.7, 0.95, False, True, True))
        labels, pending = a.labels(), a.pending
        logged = a.looks_logged
    assert [r.command for r in logged] == ["status", "certify"]
    assert all(r.time.endswith("+00:00") for r in logged)  # filled in, UTC
    with _reopen(small, path) as b:
        assert b.claim == CLAIM
        assert b.looks_logged == logged
        assert b.labels().equals(labels) and np.array_equal(b.pending, pending)
        # proposals continue exactly as without the event records
        more = b.propose(5)
    plain = tmp_path / "plain"
    with _new(small, plain) as c:
        ids = c.propose(10)
        c.record(ids, truth[ids])
        assert np.array_equal(c.propose(5), more)
    # the records sit in the ledger with sequence numbers and CRCs like every other line
    lines = [json.loads(x) for x in (path / LEDGER_NAME).read_bytes().splitlines()]
    events = [r for r in lines if r["type"] == "event"]
    assert [e["event"] for e in events] == ["claim", "look", "look"]
    assert all(r["seq"] == i for i, r in enumerate(lines))


def test_claim_is_registered_once(small, tmp_path):
    with _new(small, tmp_path / "a") as a:
        a.register_claim(CLAIM)
        with pytest.raises(ValueError, match=r"claim=.*already has the claim"):
            a.register_claim(Claim("precision", 0.5, 0.9, None, None))
        assert a.claim == CLAIM
    with _reopen(small, tmp_path / "a") as b, pytest.raises(ValueError, match="already"):
        b.register_claim(CLAIM)
    ro = _reopen(small, tmp_path / "a", read_only=True)
    with pytest.raises(ValueError, match="already"):
        ro.register_claim(CLAIM)
    with _new(small, tmp_path / "b"):
        pass
    ro = _reopen(small, tmp_path / "b", read_only=True)
    with pytest.raises(RuntimeError, match="read_only=True"):
        ro.register_claim(CLAIM)


def test_reader_logs_a_look_and_second_writer_process_is_named(small, tmp_path):
    path = tmp_path / "a"
    _new(small, path).close()
    ro = _reopen(small, path, read_only=True)
    ro.log_look(LookRecord("status", 0))
    assert _reopen(small, path, read_only=True).looks_logged == ro.looks_logged
    assert not (path / "lock").read_text().strip()  # released after the append
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a multi-threaded process
        pid = os.fork()
    if pid == 0:  # pragma: no cover - child holds the writer lock until told to stop
        code = 0
        try:
            a = _reopen(small, path)
            os.write(ready_w, b"held")
            os.read(go_r, 1)
            a.close()
        except BaseException:
            code = 3
        finally:
            os._exit(code)
    os.read(ready_r, 4)
    try:
        with pytest.raises(AuditLockedError, match=rf"locked by another writer \(pid {pid}\)"):
            ro.log_look(LookRecord("report", 0))
    finally:
        os.write(go_w, b"x")
        os.waitpid(pid, 0)
    assert len(_reopen(small, path, read_only=True).looks_logged) == 1  # nothing half-written
    ro.log_look(LookRecord("report", 0))  # free again
    assert len(_reopen(small, path, read_only=True).looks_logged) == 2


def test_old_directory_without_events_opens_and_continues(small, tmp_path):
    """A ledger written before event records (and before sequence numbers) still opens."""
    path = tmp_path / "a"
    _, truth, _ = small
    with _new(small, path) as a:
        ids = a.propose(4)
        a.record(ids, truth[ids])
    lines = [json.loads(x) for x in (path / LEDGER_NAME).read_bytes().splitlines()]
    old = b"".join(encode_line({k: v for k, v in r.items() if k not in SEQ_CRC}) for r in lines)
    (path / LEDGER_NAME).write_bytes(old)
    (path / COUNT_NAME).unlink()
    with _reopen(small, path) as b:
        assert b.claim is None and b.looks_logged == () and b.n_labels == 4
        b.log_look(LookRecord("status", 4))
    assert _reopen(small, path, read_only=True).looks_logged[0].command == "status"


def test_power_loss_inside_an_event_write_loses_nothing_acknowledged(small, tmp_path):
    path = tmp_path / "a"
    with _new(small, path) as a:
        a.register_claim(CLAIM)
        size0 = (path / LEDGER_NAME).stat().st_size
        count0 = (path / COUNT_NAME).read_bytes()
        a.log_look(LookRecord("status", 0))  # the last write
    full = (path / LEDGER_NAME).read_bytes()
    for cut in range(size0, len(full)):
        (path / LEDGER_NAME).write_bytes(full[:cut])
        (path / COUNT_NAME).write_bytes(count0)
        with _reopen(small, path) as b:
            assert b.claim == CLAIM and b.looks_logged == ()
    (path / LEDGER_NAME).write_bytes(full[: size0 + 5])  # a removed acknowledged look
    (path / COUNT_NAME).write_bytes(f"{int(count0) + 1:020d}\n".encode())
    with pytest.raises(LedgerError, match="removed at the end"):
        _reopen(small, path)


def test_damaged_event_record_is_an_error(small, tmp_path):
    path = tmp_path / "a"
    with _new(small, path) as a:
        a.register_claim(CLAIM)
    lines = (path / LEDGER_NAME).read_bytes().splitlines(keepends=True)
    rec = json.loads(lines[1])
    del rec["crc"]
    rec["data"]["level"] = 7  # a valid CRC over an invalid claim
    (path / LEDGER_NAME).write_bytes(lines[0] + encode_line(rec))
    with pytest.raises(LedgerError, match=r"line 2: malformed event record .*level=7"):
        _reopen(small, path)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Claim("f2", 0.5, 0.9, None, None), r"Claim.metric='f2' .*allowed: .*f1"),
        (lambda: Claim("f1", 1.5, 0.9, None, None), r"Claim.target=1.5 .*\[0, 1\]"),
        (lambda: Claim("f1", 0.5, 1.0, None, None), r"Claim.level=1.0 .*\(0, 1\)"),
        (lambda: Claim("f1", 0.5, 0.9, 0, None), r"Claim.batch_size=0 .*positive integer"),
        (lambda: Claim("f1", 0.5, 0.9, None, 2.5), r"Claim.budget=2.5 .*positive integer"),
        (lambda: Claim("f1", 0.5, 0.9, None, None, "daily"), r"Claim.looks='daily' .*geometric"),
        (lambda: LookRecord("", 3), r"LookRecord.command='' .*non-empty"),
        (lambda: LookRecord("status", -1), r"LookRecord.n_labels=-1 .*non-negative"),
        (lambda: LookRecord("status", 1, accepted="yes"), r"LookRecord.accepted='yes'"),
        (lambda: Claim.from_dict({**CLAIM.to_dict(), "x": 1}), r"unknown field\(s\) \['x'\]"),
        (lambda: Claim.from_dict({"metric": "f1"}), r"lacks field\(s\) \['target'"),
    ],
)
def test_bad_records_are_refused_naming_the_field(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_arguments_change_nothing(small, tmp_path):
    path = tmp_path / "a"
    with _new(small, path) as a:
        before = (path / LEDGER_NAME).read_bytes()
        with pytest.raises(TypeError, match=r"claim=.*allowed: a bayes_eval\.audit\.Claim"):
            a.register_claim(CLAIM.to_dict())
        with pytest.raises(TypeError, match=r"record=.*allowed: a bayes_eval\.audit\.LookRecord"):
            a.log_look({"command": "status", "n_labels": 0})
        assert (path / LEDGER_NAME).read_bytes() == before
        assert a.claim is None and a.looks_logged == ()


def test_round_trips_are_strict_json():
    r = LookRecord("certify", 3, "precision", 0.9, 0.95, True, False, None, "t")
    assert LookRecord.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    assert Claim.from_dict(json.loads(json.dumps(CLAIM.to_dict()))) == CLAIM
    assert Claim("f1", None, 0.9, None, None).target is None
    pop = be.Population(np.linspace(0, 1, 50), threshold=0.5)
    mem = be.Audit(pop, strata=be.stratify(pop, n_strata=2), rng=0)  # no path: kept in memory
    mem.register_claim(CLAIM)
    mem.log_look(LookRecord("status", 0))
    assert mem.claim == CLAIM and len(mem.looks_logged) == 1


def test_annotators_are_kept_in_the_label_records(small, tmp_path):
    path = tmp_path / "a"
    _, truth, _ = small
    with _new(small, path) as a:
        ids = a.propose(4)
        with pytest.raises(ValueError, match=r"annotators has 3 entries but ids has 4"):
            a.record(ids, truth[ids], annotators=["ann", "bob", "cy"])
        with pytest.raises(ValueError, match=r"annotators contains ''; allowed: non-empty strings"):
            a.record(ids, truth[ids], annotators=["ann", "", "cy", "d"])
        assert a.n_labels == 0  # refused input changes nothing
        a.record(ids, truth[ids], annotators=["ann", "bob", "ann", "cy"])
    lines = [json.loads(x) for x in (path / LEDGER_NAME).read_bytes().splitlines()]
    labels = [r for r in lines if r["type"] == "label"]
    assert [r["annotator"] for r in labels] == ["ann", "bob", "ann", "cy"]
    with _reopen(small, path) as b:
        assert b.n_labels == 4
