"""Tests of bayes_eval.recall.cooccurrence (section 6.1.1 of seeds/004_bbc0a8a725a042a8)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from bayes_eval.recall import (
    KeywordPair,
    keyword_flags,
    keyword_pair,
    neighbour_terms,
    pair_recall_from_flags,
)


def _random_matrix(rng, docs=400, terms=60, density=0.05):
    mat = sparse.random_array(
        (docs, terms),
        density=density,
        format="csr",
        rng=rng,
        data_sampler=lambda size: rng.integers(1, 4, size),
    )
    vocab = [f"t{j}" for j in range(terms)]
    return mat, vocab


def _brute(mat, vocab, seeds):
    dense = mat.toarray() != 0
    seed_docs = {i for i in range(dense.shape[0]) if any(dense[i, vocab.index(s)] for s in seeds)}
    out = {}
    for j, term in enumerate(vocab):
        if term in seeds:
            continue
        docs = set(np.flatnonzero(dense[:, j]))
        inter = len(docs & seed_docs)
        if inter == 0:
            continue
        out[term] = (inter / len(docs | seed_docs), inter / len(docs), len(docs), inter)
    return out


@pytest.mark.parametrize("similarity", ["jaccard", "overlap"])
def test_scores_match_set_definitions(similarity):
    # section 6.1.1: S_jaccard = |A_y ∩ A_seed| / |A_y ∪ A_seed|, S_overlap = |A_y ∩ A_seed| / |A_y|
    rng = np.random.default_rng(0)
    mat, vocab = _random_matrix(rng)
    seeds = ["t3", "t7"]
    table = neighbour_terms(mat, vocab, seeds, k=len(vocab), similarity=similarity)
    ref = _brute(mat, vocab, seeds)
    assert set(table["term"]) == set(ref)
    col = 0 if similarity == "jaccard" else 1
    for row in table.itertuples():
        assert row.similarity == pytest.approx(ref[row.term][col])
        assert (row.documents, row.cooccurrences) == ref[row.term][2:]
    # sorted best first, ties by co-occurrence count
    keys = list(zip(-table["similarity"], -table["cooccurrences"], strict=True))
    assert keys == sorted(keys)
    top = neighbour_terms(mat, vocab, seeds, k=5, similarity=similarity)
    assert top["term"].tolist() == table["term"].tolist()[:5]


def test_keyword_flags_match_any():
    rng = np.random.default_rng(1)
    mat, vocab = _random_matrix(rng)
    dense = mat.toarray() != 0
    flags = keyword_flags(mat.tocsc(), vocab, ["t1", "t5", "t9"])
    np.testing.assert_array_equal(flags, dense[:, [1, 5, 9]].any(axis=1))
    # explicit zeros stored in the sparse matrix are not "present"
    coo = sparse.coo_array((np.array([0, 2]), (np.array([0, 1]), np.array([1, 1]))), shape=(2, 3))
    assert keyword_flags(coo, ["a", "b", "c"], ["b"]).tolist() == [False, True]


def test_min_documents_and_overlap_rare_terms():
    # "rare" occurs once, in a seed document: overlap 1.0 unless min_documents excludes it
    dense = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [0, 1, 0, 1], [0, 0, 0, 1], [1, 0, 0, 0]])
    vocab = ["seed", "common", "rare", "other"]
    top = neighbour_terms(sparse.csr_array(dense), vocab, ["seed"], k=1, similarity="overlap")
    assert top["term"].tolist() == ["rare"]
    top2 = neighbour_terms(dense, vocab, ["seed"], k=1, similarity="overlap", min_documents=2)
    assert top2["term"].tolist() == ["common"]
    assert top2["similarity"].item() == pytest.approx(2 / 3)


def test_mapping_vocabulary_and_keyword_pair():
    # a mapping term -> column, the format of sklearn's CountVectorizer.vocabulary_ (built by hand
    # here to keep the test free of the sklearn import)
    texts = [
        "mars rover lands on mars",
        "nasa rover image of mars",
        "curiosity rover nasa mission",
        "mars bar chocolate",
        "rover nasa crater",
        "cooking pasta tonight",
        "pasta and wine",
        "nasa budget news",
    ]
    vocabulary = {t: i for i, t in enumerate(sorted({w for x in texts for w in x.split()}))}
    rows = [i for i, x in enumerate(texts) for _ in x.split()]
    cols = [vocabulary[w] for x in texts for w in x.split()]
    mat = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(texts), len(vocabulary)))
    pair = keyword_pair(mat, vocabulary, ["mars"], k=2)
    assert isinstance(pair, KeywordPair)
    assert "mars" not in pair.neighbours and pair.neighbours[0] == "rover"
    assert pair.flags_seed.tolist() == [True, True, False, True, False, False, False, False]
    s1, _, s12 = pair.sizes()
    assert s12 == int((pair.flags_seed & pair.flags_neighbours).sum()) and s1 == 3
    assert "rover" in repr(pair)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"seeds": ["pluto"]}, ValueError, "not in the vocabulary"),
        ({"seeds": []}, ValueError, "non-empty"),
        ({"similarity": "Jaccard"}, ValueError, "similarity='Jaccard'"),
        ({"k": 0}, ValueError, "k=0"),
        ({"vocabulary": ["a", "b"]}, ValueError, "vocabulary has 2 terms"),
        ({"vocabulary": ["a", "a", "b"]}, ValueError, "duplicate"),
        ({"matrix": [[1, 0, 1]]}, TypeError, "matrix has type list"),
        ({"vocabulary": "abc"}, TypeError, "vocabulary has type str"),
        ({"min_documents": 1.5}, TypeError, "min_documents"),
    ],
)
def test_bad_input(kwargs, exc, match):
    args = {
        "matrix": sparse.csr_array(np.array([[1, 0, 1], [1, 1, 0]])),
        "vocabulary": ["a", "b", "c"],
        "seeds": ["a"],
    }
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        neighbour_terms(args.pop("matrix"), args.pop("vocabulary"), args.pop("seeds"), **args)


def test_keyword_pair_no_neighbours():
    with pytest.raises(ValueError, match="no term co-occurs"):
        keyword_pair(np.array([[1, 0], [0, 1]]), ["a", "b"], ["a"])


def test_seed_and_neighbour_filters_estimate_recall():
    # synthetic corpus: on-topic documents use the seed term and topic words independently (so the
    # filters are conditionally independent given the topic); off-topic documents use background
    # words and, rarely, topic words. The pair built from co-occurrence recovers the seed filter's
    # recall from precision labels alone.
    rng = np.random.default_rng(12)
    n_docs, n_topic_words, n_background = 30_000, 15, 60
    topic = rng.random(n_docs) < 0.03
    terms = (
        ["seed"]
        + [f"topic{j}" for j in range(n_topic_words)]
        + [f"bg{j}" for j in range(n_background)]
    )
    p_on = np.r_[0.45, np.full(n_topic_words, 0.12), np.full(n_background, 0.01)]
    p_off = np.r_[0.0005, np.full(n_topic_words, 0.0008), np.full(n_background, 0.01)]
    probs = np.where(topic[:, None], p_on[None, :], p_off[None, :])
    mat = sparse.csr_array(rng.random((n_docs, len(terms))) < probs)
    pair = keyword_pair(mat, terms, ["seed"], k=n_topic_words, similarity="jaccard")
    assert set(pair.neighbours) == {f"topic{j}" for j in range(n_topic_words)}
    f1, f2 = pair.flags_seed, pair.flags_neighbours
    picks = [
        rng.choice(np.flatnonzero(m), min(200, int(m.sum())), replace=False)
        for m in (f1, f2, f1 & f2)
    ]
    lab = np.unique(np.concatenate(picks))
    res = pair_recall_from_flags(f1, f2, lab, topic[lab], draws=8000, rng=0)
    t, t1, t2, t12 = topic.sum(), (f1 & topic).sum(), (f2 & topic).sum(), (f1 & f2 & topic).sum()
    # the corpus is conditionally independent by construction, but a finite corpus realises
    # delta_1 only up to noise of order 1/sqrt(|T|) (~0.02 here); Eq. (1) then targets
    # delta_1 * r, which the 95% interval must cover, and r itself is close
    delta = t12 * t / (t1 * t2)
    assert abs(delta - 1) < 0.06
    for q, r in (("recall_1", t1 / t), ("recall_2", t2 / t)):
        lo, hi = res.interval(q, 0.95, "eti")
        assert lo <= delta * r <= hi, (q, lo, hi, delta * r)
        assert abs(res.mean(q) - r) < 0.05
