"""The rows of the field's comparison table (SimCSE, Gao et al. 2021, Table 5) and the papers' own numbers.

Why a declaration apart from the runner: a row is *what* to train or score (``train.py`` overrides, an
``evaluate.py`` scorer) and *what the papers report for it*; ``benchmarks.results.field_table`` only knows how to run
its four kinds. The papers' numbers are 7-task averages of Spearman x100 ("all" setting: STS12-16, STS-B test,
SICK-R test) on BERT-base unless the note says otherwise; the note names the source table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    """One line of the table.

    Attributes:
        key: short id (run directories, JSON).
        label: the table's first column.
        kind: ``pool`` (an ``evaluate.py`` scorer on the backbone), ``train`` (``train.py`` with ``overrides``, then
            the export scored exactly as its ``LOADING.md`` says), ``on`` (a scorer on the export of row ``base``) or
            ``ensemble`` (a command over the exports of row ``base``'s seeds, scored by its ``LOADING.md``; the papers
            table's SED / meta-embedding rows, see ``benchmarks.results.paper_rows``).
        overrides: ``train.py`` overrides (``train`` rows); an ``ensemble`` row's whole command.
        scorer: the ``evaluate.py`` scorer spec (``pool`` / ``on`` rows); ``{export}`` stands for ``base``'s export.
        base: the row whose export an ``on`` row scores on; for a ``train`` row, the row whose export ``{base}`` in
            its overrides stands for (DiffCSE's generator), trained first.
        encoder_is_export: an ``on`` row's encoder is ``base``'s export (else the backbone).
        seeded: trained / sampled with the seed (mean +- std over seeds); else scored once.
        paper: the paper's average for the same method, ``None`` where no paper reports it on BERT-base.
        paper_note: where ``paper`` comes from.
    """

    key: str
    label: str
    kind: str
    overrides: tuple[str, ...] = ()
    scorer: str | None = None
    base: str | None = None
    encoder_is_export: bool = False
    seeded: bool = True
    paper: float | None = None
    paper_note: str = ""


SIMCSE_T5 = "SimCSE Table 5, BERT-base, 7 tasks"
SBERT_T1 = "SBERT Table 1, BERT-base, 7 tasks"
SEN2PRO_T2 = "Sen2Pro Table 2, BERT-base, STS12-16 only"
PROMPT_RUN = "kongds/Prompt-BERT run.sh bert-prompt, bert-base-uncased, 7 tasks"
PROMPT_README = "kongds/Prompt-BERT README, BERT-base, 7 tasks"
# run.sh sup-bert: one template, NLI triplets, BERT's MLM transform head kept, denoised evaluation, lr 5e-5, batch 512
PROMPTBERT_SUP = ("model.objective=supervised", "data=nli", "data.format=triplets", "model.template2=null",
                  "model.head=transform", "model.eval_denoise=true", "model.lr=5e-5", "data.batch_size=512",
                  "trainer.max_epochs=3")
RANKCSE = "RankCSE (Liu et al. 2023), BERT-base, 7 tasks; teachers SimCSE-large + DiffCSE-base (ours: L6 + e5)"
DIFFCSE_T1 = "DiffCSE Table 1, BERT-base, 7 tasks"

ROWS: tuple[Row, ...] = (
    Row("cls", "CLS pooling", "pool", scorer="cls", seeded=False, paper=29.19, paper_note=SBERT_T1),
    Row("mean", "mean pooling", "pool", scorer="mean", seeded=False, paper=54.81, paper_note=SBERT_T1),
    Row("first_last", "first-last avg", "pool", scorer="first_last_avg", seeded=False, paper=56.70,
        paper_note=SIMCSE_T5),
    Row("flow", "+ flow", "train", ("model=flow",), paper=66.55, paper_note=SIMCSE_T5),
    Row("whitening", "+ whitening", "train", ("model=whitening",), seeded=False, paper=66.28, paper_note=SIMCSE_T5),
    Row("ct", "CT", "train", ("model=ct",), paper=72.05, paper_note=SIMCSE_T5),
    Row("simcse", "unsup. SimCSE", "train", ("model=simcse",), paper=76.25, paper_note=SIMCSE_T5),
    Row("sbert_nli", "SBERT-NLI", "train", ("model=sbert_nli",), paper=74.89, paper_note=SIMCSE_T5),
    Row("simcse_sup", "sup. SimCSE", "train", ("model=simcse_sup",), paper=81.57, paper_note=SIMCSE_T5),
    Row("rankcse", "RankCSE (ListMLE)", "train", ("model=rankcse",), paper=80.36, paper_note=RANKCSE),
    Row("rankcse_listnet", "RankCSE (ListNet)", "train", ("model=rankcse", "model.ranking_loss=listnet"), paper=80.05,
        paper_note=RANKCSE),
    Row("cosent", "CoSENT (STS-B train)", "train", ("model=cosent",), paper_note="no BERT-base 7-task figure"),
    # Cross-encoders and Augmented SBERT (Thakur et al. 2021): the authors' in-domain recipe, 1 epoch of STS-B train
    # each (sentence-transformers' train_sts_indomain_semantic.py); the bi-encoders with SBERT's cosine loss; AugSBERT's
    # silver pairs are each gold sentence's top-3 neighbours by all-MiniLM-L6-v2, labelled by the row's cross-encoder.
    # The cross-encoder at lr 1e-4: its fresh head reached STS-B dev 84.4 against 80.7 at 2e-5 (360 steps, L6)
    Row("cross_encoder", "cross-encoder (STS-B train)", "train", ("model=cross_encoder", "model.lr=1e-4"),
        paper_note="SBERT Table 2: STS-B test only, BERT-base cross-encoder 88.33 vs SBERT 85.35 (NLI, then STS-B)"),
    Row("bi_gold", "bi-encoder, gold only (STS-B train, cosine loss)", "train",
        ("model=cosent", "model.objective=cosine", "trainer.max_epochs=1"),
        paper_note="the AugSBERT row's baseline (same recipe, gold pairs only)"),
    Row("augsbert", "AugSBERT (gold + silver, semantic search)", "train",
        ("model=cosent", "model.objective=cosine", "trainer.max_epochs=1", "data=augmented_pairs",
         "data.cross_encoder={base}", "data.sampler=all-MiniLM-L6-v2"), base="cross_encoder",
        paper_note="Thakur et al. 2021 (abstract): +1 to +6 points in-domain over the gold-only bi-encoder"),
    # AnglE's BERT NLI recipe (SeanLee97/AnglE examples/NLI/README.md): NLI as entailment 1 / contradiction 0,
    # ibn_w 30, cosine_w 0, angle_w 1, angle_tau 20, CLS pooling, lr 5e-5 (their batch 128 x 16 accumulation x 8 GPUs
    # is not reproduced: the field table's batch applies; their SNLI + MultiNLI train are not local: SNLI dev + test,
    # the SBERT-NLI row's pairs, read as scored pairs)
    Row("angle_nli", "AnglE (NLI)", "train",
        ("model=cosent", "model.objective=angle_full", "data.sources=[nli:snli:dev,nli:snli:test]",
         "model.ibn_w=30", "model.cosine_w=0", "model.angle_tau=20", "model.pooling=cls", "model.lr=5e-5"),
        paper=82.37, paper_note="AnglE examples/NLI README, angle-bert-base-uncased-nli-en-v1, 7 tasks"),
    Row("sen2pro_first_last", "Sen2Pro on first-last avg", "pool", scorer="sen2pro", paper=66.70,
        paper_note=f"{SEN2PRO_T2} (63.69 without)"),
    Row("sen2pro_whitening", "Sen2Pro on whitening", "on", scorer="{name:sen2pro,whitening:{export}}",
        base="whitening", paper=70.39, paper_note=f"{SEN2PRO_T2} (69.21 without)"),
    Row("sen2pro_simcse", "Sen2Pro on unsup. SimCSE", "on", scorer="{name:sen2pro,pooling:cls}", base="simcse",
        encoder_is_export=True, paper=75.44, paper_note=f"{SEN2PRO_T2} (75.11 without)"),
    # PromptBERT: training-free on the backbone, then both trained recipes
    Row("prompt", "prompt [MASK] (training-free)", "pool", scorer="prompt", seeded=False, paper=67.85,
        paper_note=PROMPT_RUN),
    Row("prompt_denoise", "prompt [MASK] + template denoising", "pool", scorer="{name:prompt,denoise:true}",
        seeded=False, paper_note="no training-free BERT-base figure with denoising in the paper's code"),
    Row("promptbert", "unsup. PromptBERT", "train", ("model=promptbert",), paper=78.54,
        paper_note=f"{PROMPT_README} (+- 0.15 over seeds)"),
    Row("promptbert_sup", "sup. PromptBERT", "train", ("model=promptbert", *PROMPTBERT_SUP), paper=81.97,
        paper_note=PROMPT_README),
    # DiffCSE needs a masked LM over the backbone's vocabulary: MLM continued from the backbone, once for all seeds
    # (the paper's generator is the pretrained distilbert-base-uncased, the same for every run)
    Row("diffcse_generator", "MLM continued (DiffCSE's generator)", "train", ("model=mlm", "model.lr=1.0e-4"),
        seeded=False, paper_note="no STS figure: the generator of the diffcse row"),
    Row("diffcse", "DiffCSE", "train", ("model=diffcse", "model.generator={base}"), base="diffcse_generator",
        paper=78.49, paper_note=DIFFCSE_T1),
)

# SimCSE's seven tasks, where the data directory holds them; otherwise the local default evaluation set.
SEVEN_TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb-test", "sick-test")
LOCAL_TASKS = ("sts12", "sts16", "stsb-dev", "sick-train+sick-trial")
