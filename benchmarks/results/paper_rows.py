"""The rows of the papers-on-a-raw-backbone table: each method beside the row it claims to beat.

Why a second declaration beside ``field_rows.py``: on a small backbone we pretrained ourselves, absolute numbers say
little next to the papers' BERT-base ones; what carries over is each paper's claim, "X gains g over R". A row here
is a field row (same key, so the two tables share runs) plus ``versus`` (R), the paper's ``gain`` and its source.
Ensemble rows (``kind="ensemble"``) are built from their ``base`` row's exports over the table's seeds: ``overrides``
is the whole command with ``{backbone}``, ``{members}`` and ``{export}`` filled in, and their reference is the best
member (``BEST_MEMBER``), as the SED and meta-embedding papers claim.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.results.field_rows import ROWS as FIELD_ROWS
from benchmarks.results.field_rows import SIMCSE_T5, Row

BEST_MEMBER = "best member"  # an ensemble row's reference: the best of its base row's seeds


@dataclass(frozen=True)
class Claim:
    """What a paper claims for one row: ``gain`` over row ``versus`` (``None``: no figure), and its source."""

    versus: str | None
    gain: float | None = None
    source: str = ""


def _field(key: str) -> Row:
    return next(r for r in FIELD_ROWS if r.key == key)


SBERT_MEAN = "SBERT Table 1 mean pooling 54.81"
WK_NOTE = ("SBERT-WK Table VII: on SBERT-NLI-base (no raw-BERT STS figure), Pearson, STS12-16 + STS-B, "
           "70.65 -> 74.21")
LATTE_NOTE = ("Latte-Mix Table 5: BERT-base last layer, 7 tasks (STS12-16, SICK-R, STS-B; our average of its "
              "columns), mean 53.42 -> {}")
META_NOTE = ("Meta-embeddings Table 2: sources ParaNMT + USE + SBERT-large (not BERT students), Spearman, "
             "average of the STS12-16 and STS-B test columns, best single source ParaNMT 73.80 -> {}")
SEN2PRO_NOTE = ("Sen2Pro Table 2: BERT-base first-last avg, 'Avg' 63.69 -> 66.70 (its five STS12-16 columns average "
                "64.61 -> 67.31, +2.70; the same method in Table 6, 7 tasks: 63.69 -> 65.23, +1.54)")
# the members' exports are plain encoder directories: mean pooling, as CT trains them (build_source's default)
SED_COMMAND = ("train.py", "model=sed", "model.model_name_or_path={backbone}", "data.teachers=[{members}]",
               "data.align_to=null")
GCCA_COMMAND = ("-m", "sts_lightning.fit_meta", "--method", "gcca", "--sources", "{members}",
                "--max-sentences", "6000", "--out", "{export}")  # the cross-view AE's default corpus size
AE_COMMAND = ("train.py", "model=cross_view_ae", "data.sources=[{members}]")

ROWS: tuple[Row, ...] = (
    _field("cls"), _field("mean"), _field("first_last"),
    Row("sbert_wk", "SBERT-WK (authors' code)", "pool", scorer="{name:sbert_wk,variant:code}", seeded=False),
    Row("sbert_wk_paper", "SBERT-WK (paper)", "pool", scorer="{name:sbert_wk,variant:paper,label:sbert_wk_paper}",
        seeded=False),
    _field("sen2pro_first_last"),
    Row("latte_mix", "Latte-Mix + cosine", "train", ("model=latte_mix",)),
    Row("latte_mix_js", "Latte-Mix + JS", "on", scorer="{name:latte_mix,path:{export},distance:js}",
        base="latte_mix"),
    _field("flow"), _field("whitening"), _field("ct"), _field("simcse"),
    Row("tsdae", "TSDAE", "train", ("model=tsdae",)),
    _field("sbert_nli"),
    Row("sed_ct", "SED from the CT students", "ensemble", SED_COMMAND, base="ct"),
    Row("gcca_ct", "GCCA of the CT students", "ensemble", GCCA_COMMAND, base="ct", seeded=False),
    Row("cross_view_ae_ct", "cross-view AE of the CT students", "ensemble", AE_COMMAND, base="ct"),
)

CLAIMS: dict[str, Claim] = {
    "cls": Claim(None, source="reference"),
    "mean": Claim(None, source="reference"),
    "first_last": Claim(None, source="reference"),
    "sbert_wk": Claim("mean", 3.56, WK_NOTE),
    "sbert_wk_paper": Claim("mean", 3.56, WK_NOTE),
    "sen2pro_first_last": Claim("first_last", 3.01, SEN2PRO_NOTE),
    "latte_mix": Claim("mean", 5.57, LATTE_NOTE.format("58.99")),
    "latte_mix_js": Claim("mean", 3.36, LATTE_NOTE.format("56.78")),
    "flow": Claim("first_last", 9.85, f"{SIMCSE_T5}: first-last 56.70 -> 66.55"),
    "whitening": Claim("first_last", 9.58, f"{SIMCSE_T5}: first-last 56.70 -> 66.28"),
    "ct": Claim("mean", 17.24, f"{SIMCSE_T5} CT 72.05 vs {SBERT_MEAN}"),
    "simcse": Claim("mean", 21.44, f"{SIMCSE_T5} SimCSE 76.25 vs {SBERT_MEAN}"),
    "tsdae": Claim("mean", None, "TSDAE (arXiv 2104.06979) reports no STS figure we could find: it evaluates on "
                                 "AskUbuntu, CQADupStack, TwitterPara, SciDocs"),
    "sbert_nli": Claim("mean", 20.08, "SBERT Table 1, BERT-base, 7 tasks: mean 54.81 -> SBERT-NLI 74.89"),
    "sed_ct": Claim(BEST_MEMBER, 1.54, "SED Table 3: BERT-large CT, 10 teachers, Spearman STS12-16, learners' mean "
                                      "76.76 vs best teacher 75.22 (BERT-base, App. Table 5: CT-SED 72.45 vs CT 73.29)"),
    "gcca_ct": Claim(BEST_MEMBER, 5.15, META_NOTE.format("GCCA 78.95")),
    "cross_view_ae_ct": Claim(BEST_MEMBER, 3.83, META_NOTE.format("AE 77.63")),
}


def with_references(keys: list[str]) -> list[str]:
    """``keys`` plus the rows their gains need (the ``versus`` row, an ensemble's ``base``), in table order."""
    needed, todo = set(), list(keys)
    while todo:
        key = todo.pop()
        if key in needed:
            continue
        needed.add(key)
        row = next(r for r in ROWS if r.key == key)
        todo += [k for k in (CLAIMS[key].versus, row.base) if k in CLAIMS]
    return [r.key for r in ROWS if r.key in needed]
