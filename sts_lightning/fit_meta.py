"""Fit a training-free meta-embedding (conc / avg / svd / gcca) on unlabelled sentences and export it.

    python -m sts_lightning.fit_meta --method gcca --sources all-mpnet-base-v2,paraphrase-MiniLM-L3-v2 --out <dir>

The export scores as ``scorers=[{name:meta,path:<dir>}]`` (``encoders=[none]``) and is a SED teacher as
``data.teachers=[<dir>]``. Source vectors are cached (``$STS_CACHE_DIR/sources``): a refit does not re-encode.
"""

from __future__ import annotations

import argparse
import logging
import time

import torch
import yaml

from sts_lightning.datamodules.sentence_files import read_sentences
from sts_lightning.embeddings.errors import ConfigError, run_or_exit
from sts_lightning.embeddings.io.cache_root import cache_dir_or_root
from sts_lightning.embeddings.io.model_card import DataFacts, TrainingFacts
from sts_lightning.embeddings.methods.meta.projections import METHODS, MetaProjection, fit_meta
from sts_lightning.embeddings.methods.meta.scorer import save_meta_embedding
from sts_lightning.embeddings.sources.build import build_source
from sts_lightning.embeddings.sources.cache import cached_source_vectors

log = logging.getLogger(__name__)


def fit_and_export(args: argparse.Namespace) -> MetaProjection:
    started = time.monotonic()
    if args.method == "ae":
        raise ConfigError(train_instead(args))
    if args.align_mean and not args.align_to:  # before any encoding: a flag that would do nothing is an error
        raise ConfigError("--align-mean adds a source's corpus mean after --align-to's rotation: give --align-to <source>")
    sentences = read_sentences(args.files.split(","), args.data_dir, max_words=args.max_words,
                               max_sentences=args.max_sentences, cache_dir=args.cache_dir)
    specs = args.sources.split(",")
    sources = [build_source(s) for s in specs]
    views = [torch.from_numpy(cached_source_vectors(s, sentences, cache_dir_or_root(args.cache_dir))) for s in sources]
    log.info("fitting %s on %d sentences, sources %s", args.method, len(sentences), specs)
    projection = fit_meta(args.method, views, d=args.d, tau=args.tau)
    if args.align_to:
        target = cached_source_vectors(build_source(args.align_to), sentences, cache_dir_or_root(args.cache_dir))
        projection.align_to(views, torch.from_numpy(target), add_target_mean=args.align_mean)
        log.info("rotated onto %s (scale %.4f%s)", args.align_to, projection.options["align_scale"],
                 ", + its mean" if args.align_mean else "")
    # The card: these arguments are the whole config; no steps, precision (float32 on the CPU) nor STS table here.
    facts = TrainingFacts(yaml.safe_dump({k: v for k, v in vars(args).items() if k != "out"}, sort_keys=False),
                          DataFacts(tuple(args.files.split(",")), len(sentences), "sentences"),
                          wall_time_s=time.monotonic() - started)
    # what each source is now: the export refuses to score once a source name means other weights
    save_meta_embedding(args.out, projection, [{"model": s} for s in specs], training=facts,
                        fitted_on=[s.identity() for s in sources])
    print(f"wrote {args.out} ({args.method}, {projection.output_dim}-d, sources {specs})")
    return projection


def train_instead(args: argparse.Namespace) -> str:
    """The one-line answer to ``--method ae``: the ``train.py`` command with these sources, files and size."""
    files = ",".join(args.files.split(","))
    command = f"python train.py model=cross_view_ae 'data.sources=[{args.sources}]' 'data.files=[{files}]'"
    if args.data_dir:
        command += f" paths.data_dir={args.data_dir}"
    if args.max_sentences is not None:
        command += f" data.max_sentences={args.max_sentences}"
    if args.d is not None:
        command += f" model.d={args.d}"
    return (f"--method ae: the cross-view autoencoder trains through train.py, run `{command}` (its export is "
            "{name: meta, path: <run>/export}); sts_lightning.fit_meta fits the training-free conc / avg / svd / gcca")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--method", choices=METHODS, default="gcca",
                        help="ae is refused with the train.py model=cross_view_ae command that trains it")
    parser.add_argument("--sources", required=True, help="comma-separated build_source names")
    parser.add_argument("--files", default="onebillion/1b_benchmark.dev.tokens,onebillion/1b_benchmark.test.tokens")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--max-sentences", type=int, default=None)
    parser.add_argument("--max-words", type=int, default=59)
    parser.add_argument("--d", type=int, default=None, help="output dim (default: the largest source dim)")
    parser.add_argument("--tau", type=float, default=10.0, help="GCCA regulariser")
    parser.add_argument("--align-to", default=None,
                        help="rotate the output onto this source's space (e.g. a SED student's starting model)")
    parser.add_argument("--align-mean", action="store_true",
                        help="with --align-to: rotate centred spaces, then add the source's corpus mean")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    run_or_exit(fit_and_export, args)


if __name__ == "__main__":
    main()
