"""Keyword-filter classifier pairs from term co-occurrence (seed terms and their neighbours).

Bommannavar, Kolcz & Rajaraman (``../shared/seeds/004_bbc0a8a725a042a8.txt``, section 6.1.1) build
a conditionally independent classifier pair from a *seed* filter :math:`C_{seed}` (documents
containing any seed term, e.g. ``mars``, ``#mars``) and a *neighbour* filter
:math:`C_{neighbours}` (documents containing any of the top-scoring other terms). With
:math:`A_y` the documents containing term :math:`y` and :math:`A_{seed}` those matched by the seed
filter, the scores are

.. math::

    S_{jaccard}(A_y, A_{seed}) = \\frac{|A_y \\cap A_{seed}|}{|A_y \\cup A_{seed}|}, \\qquad
    S_{overlap}(A_y, A_{seed}) = \\frac{|A_y \\cap A_{seed}|}{|A_y|}.

Everything is one sparse product: with :math:`B` the binary document-term matrix and :math:`s` the
seed indicator over documents, :math:`|A_y \\cap A_{seed}| = (B^\\top s)_y` and
:math:`|A_y| = (B^\\top 1)_y`.

The flags returned feed :func:`bayes_eval.recall.pair_recall_from_flags`. Note that a keyword
pair is only as good as its conditional independence: check it (``delta_1``, or a third
classifier with :func:`bayes_eval.recall.pairwise_totals`).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import sparse

from .._validation import check_nonnegative_int, check_option, check_positive_int

__all__ = ["SIMILARITIES", "KeywordPair", "keyword_flags", "keyword_pair", "neighbour_terms"]

#: similarity scores of section 6.1.1
SIMILARITIES = ("jaccard", "overlap")


def _binary(matrix: Any) -> sparse.csr_array:
    if sparse.issparse(matrix) or (isinstance(matrix, np.ndarray) and matrix.ndim == 2):
        mat = sparse.csr_array(matrix)
    else:
        raise TypeError(
            f"matrix has type {type(matrix).__name__}; allowed: a scipy.sparse document-term "
            "matrix (documents x terms) or a 2-D numpy array"
        )
    if not (np.issubdtype(mat.dtype, np.number) or mat.dtype == bool):
        raise TypeError(f"matrix has dtype {mat.dtype}; allowed: numeric term counts or booleans")
    return (mat != 0).astype(np.int32)


def _term_index(vocabulary: Any, n_terms: int) -> dict[str, int]:
    if isinstance(vocabulary, Mapping):
        index = {str(t): int(i) for t, i in vocabulary.items()}
        cols = np.fromiter(index.values(), dtype=np.int64, count=len(index))
        if cols.size and (cols.min() < 0 or cols.max() >= n_terms):
            bad = cols.max() if cols.max() >= n_terms else cols.min()
            raise ValueError(
                f"vocabulary maps a term to column {bad}; allowed: columns 0 .. {n_terms - 1}"
            )
        return index
    if isinstance(vocabulary, str) or not isinstance(vocabulary, Sequence | np.ndarray):
        raise TypeError(
            f"vocabulary has type {type(vocabulary).__name__}; allowed: a sequence of terms in "
            "column order or a mapping term -> column (e.g. CountVectorizer.vocabulary_)"
        )
    terms = [str(t) for t in vocabulary]
    if len(terms) != n_terms:
        raise ValueError(
            f"vocabulary has {len(terms)} terms but the matrix has {n_terms} columns; allowed: "
            "one term per column"
        )
    index = {t: i for i, t in enumerate(terms)}
    if len(index) != n_terms:
        raise ValueError("vocabulary contains duplicate terms; allowed: distinct terms")
    return index


def _columns(terms: Any, index: Mapping[str, int], name: str) -> np.ndarray:
    if isinstance(terms, str):
        terms = [terms]
    if not isinstance(terms, Sequence | np.ndarray) or len(terms) == 0:
        raise ValueError(f"{name}={terms!r}; allowed: a non-empty sequence of terms")
    missing = [t for t in terms if str(t) not in index]
    if missing:
        raise ValueError(f"{name} contains {missing[:5]!r}, not in the vocabulary")
    return np.array(sorted({index[str(t)] for t in terms}), dtype=np.int64)


def _any_of(binary: sparse.csr_array, cols: np.ndarray) -> np.ndarray:
    return np.asarray(binary[:, cols].sum(axis=1)).ravel() > 0


def keyword_flags(
    matrix: ArrayLike | sparse.sparray | sparse.spmatrix,
    vocabulary: Sequence[str] | Mapping[str, int],
    terms: Sequence[str],
) -> np.ndarray:
    """Keyword-filter classifier: a document is flagged if it contains any of ``terms``.

    Parameters
    ----------
    matrix : scipy.sparse matrix or array, shape (documents, terms)
        Term counts (any non-zero entry means "present").
    vocabulary : sequence of str or mapping str -> int
        Column terms.
    terms : sequence of str

    Returns
    -------
    numpy.ndarray of bool, shape (documents,)

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import sparse
    >>> X = sparse.csr_array(np.array([[1, 0, 2], [0, 1, 0], [0, 0, 0]]))
    >>> keyword_flags(X, ["mars", "rover", "nasa"], ["mars", "nasa"]).tolist()
    [True, False, False]
    """
    binary = _binary(matrix)
    index = _term_index(vocabulary, binary.shape[1])
    return _any_of(binary, _columns(terms, index, "terms"))


def neighbour_terms(
    matrix: ArrayLike | sparse.sparray | sparse.spmatrix,
    vocabulary: Sequence[str] | Mapping[str, int],
    seeds: Sequence[str],
    *,
    k: int = 20,
    similarity: str = "jaccard",
    min_documents: int = 1,
) -> pd.DataFrame:
    """Top-``k`` neighbour terms of the seed terms by Jaccard or overlap similarity.

    .. math::

        S_{jaccard} = \\frac{|A_y \\cap A_{seed}|}{|A_y| + |A_{seed}| - |A_y \\cap A_{seed}|},
        \\qquad S_{overlap} = \\frac{|A_y \\cap A_{seed}|}{|A_y|}

    Seed terms are left out, as are terms that never co-occur with them and terms in fewer than
    ``min_documents`` documents (the overlap score favours rare terms: a term seen once, in a seed
    document, scores 1). Ties are broken by co-occurrence count, then by column order.

    Parameters
    ----------
    matrix : scipy.sparse matrix or array, shape (documents, terms)
    vocabulary : sequence of str or mapping str -> int
    seeds : sequence of str
    k : int
        Number of neighbours (fewer if fewer terms qualify).
    similarity : {"jaccard", "overlap"}
    min_documents : int
        Minimum :math:`|A_y|`.

    Returns
    -------
    pandas.DataFrame
        Columns ``term``, ``similarity``, ``documents`` (:math:`|A_y|`), ``cooccurrences``
        (:math:`|A_y \\cap A_{seed}|`), best first.

    References
    ----------
    Bommannavar, Kolcz & Rajaraman, ``../shared/seeds/004_bbc0a8a725a042a8.txt``, section 6.1.1
    and Table 2.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import sparse
    >>> X = sparse.csr_array(np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [1, 0, 0]]))
    >>> neighbour_terms(X, ["mars", "rover", "cake"], ["mars"], k=2)["term"].tolist()
    ['rover', 'cake']
    """
    check_option(similarity, "similarity", SIMILARITIES)
    k = check_positive_int(k, "k")
    if isinstance(min_documents, numbers.Integral):
        min_documents = check_nonnegative_int(min_documents, "min_documents")
    else:
        raise TypeError(f"min_documents={min_documents!r} must be a non-negative integer")
    binary = _binary(matrix)
    index = _term_index(vocabulary, binary.shape[1])
    seed_cols = _columns(seeds, index, "seeds")
    seed_docs = _any_of(binary, seed_cols).astype(np.int32)
    co = np.asarray(binary.T @ seed_docs).ravel().astype(np.int64)
    docs = np.asarray(binary.sum(axis=0)).ravel().astype(np.int64)
    n_seed = int(seed_docs.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        score = co / (docs + n_seed - co) if similarity == "jaccard" else co / docs
    keep = (co > 0) & (docs >= max(min_documents, 1))
    keep[seed_cols] = False
    cand = np.flatnonzero(keep)
    order = np.lexsort((cand, -co[cand], -score[cand]))[:k]
    chosen = cand[order]
    names = np.empty(binary.shape[1], dtype=object)
    for term, col in index.items():
        names[col] = term
    return pd.DataFrame(
        {
            "term": names[chosen],
            "similarity": score[chosen],
            "documents": docs[chosen],
            "cooccurrences": co[chosen],
        }
    )


@dataclass(frozen=True, slots=True)
class KeywordPair:
    """A seed filter and a neighbour filter over the same documents.

    Attributes
    ----------
    seeds, neighbours : tuple of str
    flags_seed, flags_neighbours : numpy.ndarray of bool
        Documents flagged by each filter (pass them to ``pair_recall_from_flags``).
    table : pandas.DataFrame
        The neighbour table of :func:`neighbour_terms`.
    similarity : str
    """

    seeds: tuple[str, ...]
    neighbours: tuple[str, ...]
    flags_seed: np.ndarray
    flags_neighbours: np.ndarray
    table: pd.DataFrame
    similarity: str

    def sizes(self) -> tuple[int, int, int]:
        """``(|A_seed|, |A_neighbours|, |A_joint|)``, the first arguments of ``pair_recall``."""
        both = self.flags_seed & self.flags_neighbours
        return int(self.flags_seed.sum()), int(self.flags_neighbours.sum()), int(both.sum())

    def __repr__(self) -> str:
        s1, s2, s12 = self.sizes()
        shown = ", ".join(self.neighbours[:8]) + (", ..." if len(self.neighbours) > 8 else "")
        return (
            f"KeywordPair(seeds={list(self.seeds)}, {len(self.neighbours)} {self.similarity} "
            f"neighbours [{shown}]; |A_seed|={s1}, |A_neighbours|={s2}, |A_joint|={s12})"
        )


def keyword_pair(
    matrix: ArrayLike | sparse.sparray | sparse.spmatrix,
    vocabulary: Sequence[str] | Mapping[str, int],
    seeds: Sequence[str],
    *,
    k: int = 20,
    similarity: str = "jaccard",
    min_documents: int = 1,
) -> KeywordPair:
    """Seed filter and top-``k`` neighbour filter (section 6.1.1) as boolean flags.

    :math:`C_{seed}` flags documents containing any seed term; :math:`C_{neighbours}` flags
    documents containing any of the top-``k`` neighbours of :func:`neighbour_terms` (seed terms
    left out).

    References
    ----------
    Bommannavar, Kolcz & Rajaraman, ``../shared/seeds/004_bbc0a8a725a042a8.txt``, section 6.1.1.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import sparse
    >>> X = sparse.csr_array(np.array([[1, 1, 0], [1, 1, 1], [0, 0, 1], [1, 0, 0]]))
    >>> pair = keyword_pair(X, ["mars", "rover", "cake"], ["mars"], k=1)
    >>> pair.neighbours, pair.sizes()
    (('rover',), (3, 2, 2))
    """
    table = neighbour_terms(
        matrix, vocabulary, seeds, k=k, similarity=similarity, min_documents=min_documents
    )
    if table.empty:
        raise ValueError(
            f"no term co-occurs with seeds={list(seeds)!r} in at least {min_documents} "
            "document(s); the neighbour filter would be empty"
        )
    binary = _binary(matrix)
    index = _term_index(vocabulary, binary.shape[1])
    seed_cols = _columns(seeds, index, "seeds")
    neigh = tuple(str(t) for t in table["term"])
    return KeywordPair(
        seeds=tuple(str(s) for s in ([seeds] if isinstance(seeds, str) else seeds)),
        neighbours=neigh,
        flags_seed=_any_of(binary, seed_cols),
        flags_neighbours=_any_of(binary, _columns(list(neigh), index, "neighbours")),
        table=table,
        similarity=similarity,
    )
