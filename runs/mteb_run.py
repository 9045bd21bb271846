"""Score an encoder + scorer of ours with ``mteb``: ``python -m sts_lightning.runs.mteb_run --model X --scorer mean --tasks A,B``.

Online, ``--tasks`` are MTEB task names scored by mteb's evaluator (comparable with the leaderboard); ``--local``:
our local sets, ``--check`` also printing ``evaluate.py``'s scoring, which must agree.
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.errors import ConfigError, DataError, run_or_exit
from sts_lightning.embeddings.io.package_files import CONFIG_DIR
from sts_lightning.embeddings.scoring.mteb_adapter import MTEBScorerModel, model_name, require_mteb
from sts_lightning.embeddings.scoring.registry import ENCODER_FREE, build_scorer
from sts_lightning.runs.constructor_defaults import nodes as constructor_nodes
from sts_lightning.sts.mteb_tasks import mteb_sts_task, pooled_pairs, task_sentences
from sts_lightning.sts.scoring import score_tasks
from sts_lightning.sts.tasks import load_task

log = logging.getLogger(__name__)


def evaluate_defaults() -> tuple[dict, dict]:
    """``encoder`` and ``scorer_options`` as ``evaluate.py`` composes them (the constructors' defaults under it)."""
    written = OmegaConf.load(CONFIG_DIR / "evaluate.yaml")
    defaults = constructor_nodes()
    cfg = OmegaConf.merge({"encoder": defaults["encoder_options"], "scorer_options": defaults["scorer_options"]},
                          written)
    return (OmegaConf.to_container(cfg.encoder, resolve=True),  # type: ignore[return-value]
            OmegaConf.to_container(cfg.scorer_options, resolve=True))


def scorer_spec(name: str, options: list[str]) -> str | dict:
    """``mean`` or ``{name: <scorer>, n_samples: 5}`` from ``--scorer`` and ``--option k=v``."""
    if not options:
        return name
    spec: dict[str, Any] = {"name": name}
    for item in options:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option {item!r}: expected key=value")
        spec[key] = yaml.safe_load(value)  # 5 -> int, [model] -> list, paper -> str
    return spec


def online_tasks(names: list[str]) -> list[Any]:
    """mteb's own tasks, downloaded; offline (or an unknown name) is one line, not a traceback."""
    mteb = require_mteb()
    try:
        tasks = list(mteb.get_tasks(tasks=names))
    except KeyError as err:
        raise ConfigError(f"unknown MTEB task: {err.args[0] if err.args else err}") from err
    for task in tasks:
        try:
            task.load_data()
        except Exception as err:  # offline, hub outage, auth: all mean "cannot download" to the user
            raise DataError(f"could not download MTEB task {task.metadata.name} from the Hugging Face hub "
                            f"({type(err).__name__}; offline?). Offline, score the local sets instead: "
                            f"--local --tasks STS12,STS16,stsb-dev") from err
    return tasks


def mteb_task_sentences(tasks: list[Any]) -> list[str]:
    """Every first sentence of every STS split, then every second one (one ``represent`` call for all)."""
    first: list[str] = []
    second: list[str] = []
    for task in tasks:
        if task.metadata.type != "STS":
            continue
        col1, col2 = task.column_names
        data = task.dataset
        for subset in task.hf_subsets:
            for split in task.metadata.eval_splits:
                rows = data[split] if subset not in data and subset == "default" else data[subset][split]
                first.extend(rows[col1])
                second.extend(rows[col2])
    return first + second


def score_row(result: Any) -> list[dict]:
    """One dict per (split, subset) of an mteb ``TaskResult``: ours (``spearman``) and the main score."""
    return [{"task": result.task_name, "split": split, "subset": s["hf_subset"], "spearman": 100 * s["spearman"],
             "cosine_spearman": 100 * s["cosine_spearman"], "main_score": 100 * s["main_score"]}
            for split, scores in result.scores.items() for s in scores]


def run(args: argparse.Namespace) -> list[dict]:
    mteb = require_mteb()
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not names:
        raise ConfigError("--tasks is empty: e.g. --tasks STSBenchmark,SICK-R (online) or --local --tasks STS12")
    if args.check and not args.local:
        raise ConfigError("--check compares with evaluate.py's scoring of the local sets: use it with --local")
    enc_opts, scorer_defaults = evaluate_defaults()
    enc_opts.update({k: v for k, v in (("device", args.device), ("batch_size", args.batch_size),
                                       ("max_length", args.max_length)) if v is not None})
    spec = scorer_spec(args.scorer, args.option)
    local = [load_task(n, args.data_dir) for n in names] if args.local else []
    tasks = [mteb_sts_task(t) for t in local] if args.local else online_tasks(names)
    encoder = None if args.model == "none" else load_encoder(args.model, **enc_opts)
    if encoder is None and args.scorer not in ENCODER_FREE:
        raise ConfigError(f"--model none suits only the encoder-free scorers {sorted(ENCODER_FREE)}")
    scorer = build_scorer(spec, encoder, scorer_defaults)
    model = MTEBScorerModel(scorer, name=model_name(args.model, scorer.name))
    t0 = time.perf_counter()
    model.prepare(task_sentences(local) if args.local else mteb_task_sentences(tasks))
    log.info("represented %d sentences in %.1fs", model.num_prepared, time.perf_counter() - t0)
    out = Path(args.output_dir or f"outputs/mteb/{time.strftime('%Y-%m-%d_%H-%M-%S')}")
    result = mteb.evaluate(model, tasks, cache=mteb.ResultCache(cache_path=out), overwrite_strategy="always",
                           encode_kwargs={"batch_size": enc_opts.get("batch_size") or 64}, show_progress_bar=False)
    rows = [r for task_result in result.task_results for r in score_row(task_result)]
    if args.check:
        check_scorer = build_scorer(spec, encoder, scorer_defaults)
        ours = score_tasks(check_scorer, local)
        for row, task in zip(rows, local, strict=True):
            row["evaluate_py"] = ours[task.name]["all"]["spearman"]
            row["pairs"] = len(pooled_pairs(task)[0])
    print_table(rows, model)
    print(f"mteb result files: {out}")
    return rows


def print_table(rows: list[dict], model: MTEBScorerModel) -> None:
    check = any("evaluate_py" in r for r in rows)
    head = "| task | split | spearman (ours, via mteb) | cosine_spearman (mteb main_score) |"
    head += " evaluate.py | difference |" if check else ""
    print(f"\n{model.name}\n{head}\n|{'---|' * (head.count('|') - 1)}")
    for r in rows:
        line = f"| {r['task']} | {r['split']} | {r['spearman']:.4f} | {r['cosine_spearman']:.4f} |"
        if check:
            diff = r["spearman"] - r["evaluate_py"]
            line += f" {r['evaluate_py']:.4f} | {diff:.2e} |" if not math.isnan(diff) else " nan | nan |"
        print(line)
    if not model.by_cosine:
        print(f"note: {model.scorer.name} does not score by cosine of one vector: its number is mteb's `spearman` "
              f"(the model's own similarity_pairwise); mteb's main_score `cosine_spearman` is a cosine of packed "
              f"representation numbers and not this method's score.")


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m sts_lightning.runs.mteb_run", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="encoder: packaged name, export dir, *.ckpt, hub name, none")
    parser.add_argument("--scorer", default="mean", help="scorer name (embeddings/scoring/registry.py)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="scorer option, repeatable: --option n_samples=5 --option path=<export>")
    parser.add_argument("--tasks", required=True, help="comma-separated: MTEB names (online) or local tasks")
    parser.add_argument("--local", action="store_true", help="score local sets (sts/tasks.py names or MTEB names)")
    parser.add_argument("--check", action="store_true", help="with --local: also evaluate.py's scoring, side by side")
    parser.add_argument("--data-dir", default=None, help="local STS data (default $STS_DATA_DIR)")
    parser.add_argument("--output-dir", default=None, help="mteb result files (default outputs/mteb/<time>)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--max-length", type=int, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for noisy in ("mteb", "datasets", "httpx", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return run_or_exit(run, args)


if __name__ == "__main__":
    main()
