"""The classifiers that score the held-out real populations (``heldout_populations.py``).

Each kind is trained on the seeded training part of a population's source and scores every item;
its threshold maximises F1 on held-out scores of the training part where the training part's own
scores would be those of an overfitted model (forests: out-of-bag; extremely randomised trees and
k-nearest neighbours: 3-fold cross-validated), else on the training part's own scores. The kinds
differ in the *shape* of their scores, which is what the default model must survive:

* ``logistic``: L2 logistic regression on standardised features (smooth, near calibrated);
* ``boosted``: ``HistGradientBoostingClassifier`` (piecewise constant, ties);
* ``forest`` / ``forest_leaf5`` / ``extra_trees``: tree ensembles (multiples of 0.01 or 0.005,
  exact 0 and 1);
* ``naive_bayes`` (session 52): Gaussian naive Bayes -- over-confident, most scores within
  1e-6 of 0 or 1;
* ``knn`` (session 52): 25 nearest neighbours on standardised features -- 26 distinct scores;
* ``tree3`` (session 52): one decision tree of depth 3 -- at most 8 distinct scores, a rule
  list's;
* ``svm`` (session 52): a linear SVM's decision value through the logistic function, without
  Platt scaling -- ranked well, on the wrong scale (compressed towards 0.5 or stretched);
* ``mlp`` (session 52): a multilayer perceptron (one hidden layer of 32) -- smooth, over-
  confident where it extrapolates;
* ``adaboost`` (session 52): AdaBoost of 50 decision stumps -- scores compressed into a narrow
  band around 0.5.
"""

from __future__ import annotations

import contextlib

import numpy as np

from bayes_eval.datasets import _f1_threshold, _logistic_irls

__all__ = ["KINDS", "fit_scores"]

#: the classifier kinds :func:`fit_scores` trains
KINDS = (
    "logistic",
    "boosted",
    "forest",
    "forest_leaf5",
    "extra_trees",
    "naive_bayes",
    "knn",
    "tree3",
    "svm",
    "mlp",
    "adaboost",
)


def _standardised(x: np.ndarray, train: np.ndarray) -> np.ndarray:
    mean, sd = x[train].mean(axis=0), x[train].std(axis=0)
    sd[sd == 0] = 1.0
    return (x - mean) / sd


def _cross_validated(clf, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from sklearn.model_selection import cross_val_predict

    return cross_val_predict(clf, x, y, cv=3, method="predict_proba")[:, 1]


def fit_scores(
    kind: str, x: np.ndarray, y: np.ndarray, train: np.ndarray, seed: int
) -> tuple[np.ndarray, float]:
    """Train ``kind`` (one of :data:`KINDS`) on the rows ``train`` of ``x`` (labels ``y``);
    return every row's score and the threshold (see the module docstring)."""
    from threadpoolctl import threadpool_limits

    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}; allowed: {', '.join(KINDS)}")
    yt = y[train]
    held = None
    # OpenMP / BLAS threads fight the lock-step audits for the cores (the first kinds ran
    # without the limit before session 52 and keep doing so: their scores stay bit for bit)
    limit = kind not in ("logistic", "forest", "forest_leaf5", "extra_trees")
    with threadpool_limits(1) if limit else contextlib.nullcontext():
        if kind == "logistic":
            z = np.column_stack([np.ones(x.shape[0]), _standardised(x, train)])
            w = _logistic_irls(z[train], yt.astype(np.float64), 1.0)
            scores = 1.0 / (1.0 + np.exp(-(z @ w)))
        elif kind in ("forest", "forest_leaf5"):
            from sklearn.ensemble import RandomForestClassifier

            # scikit-learn's defaults (fully grown trees, 100 of them): scores are multiples of
            # 0.01, exact 0 and 1 common; the threshold is tuned on the out-of-bag scores, as a
            # careful user does (the training part's own scores are an overfitted forest's)
            grow = {} if kind == "forest" else {"n_estimators": 200, "min_samples_leaf": 5}
            clf = RandomForestClassifier(oob_score=True, random_state=seed, n_jobs=1, **grow)
            clf.fit(x[train], yt)
            scores = clf.predict_proba(x)[:, 1]
            held = clf.oob_decision_function_[:, 1]
        elif kind == "extra_trees":
            from sklearn.ensemble import ExtraTreesClassifier

            # no bootstrap, so no out-of-bag scores: cross-validated ones
            clf = ExtraTreesClassifier(random_state=seed, n_jobs=1)
            held = _cross_validated(clf, x[train], yt)
            scores = clf.fit(x[train], yt).predict_proba(x)[:, 1]
        elif kind == "boosted":
            from sklearn.ensemble import HistGradientBoostingClassifier

            clf = HistGradientBoostingClassifier(random_state=seed).fit(x[train], yt)
            scores = clf.predict_proba(x)[:, 1]
        elif kind == "naive_bayes":
            from sklearn.naive_bayes import GaussianNB

            scores = GaussianNB().fit(x[train], yt).predict_proba(x)[:, 1]
        elif kind == "knn":
            from sklearn.neighbors import KNeighborsClassifier

            z = _standardised(x, train)
            clf = KNeighborsClassifier(n_neighbors=25, n_jobs=1)
            # a training item is its own nearest neighbour: cross-validated scores
            held = _cross_validated(clf, z[train], yt)
            scores = clf.fit(z[train], yt).predict_proba(z)[:, 1]
        elif kind == "tree3":
            from sklearn.tree import DecisionTreeClassifier

            clf = DecisionTreeClassifier(max_depth=3, random_state=seed).fit(x[train], yt)
            scores = clf.predict_proba(x)[:, 1]
        elif kind == "svm":
            from sklearn.svm import LinearSVC

            z = _standardised(x, train)
            clf = LinearSVC(C=1.0, random_state=seed).fit(z[train], yt)
            scores = 1.0 / (1.0 + np.exp(-clf.decision_function(z)))
        elif kind == "mlp":
            from sklearn.neural_network import MLPClassifier

            z = _standardised(x, train)
            clf = MLPClassifier(hidden_layer_sizes=(32,), max_iter=300, random_state=seed)
            scores = clf.fit(z[train], yt).predict_proba(z)[:, 1]
        else:  # adaboost
            from sklearn.ensemble import AdaBoostClassifier

            clf = AdaBoostClassifier(n_estimators=50, random_state=seed).fit(x[train], yt)
            scores = clf.predict_proba(x)[:, 1]
    threshold = _f1_threshold(scores[train] if held is None else held, yt)
    return np.asarray(scores, dtype=np.float64), float(threshold)
