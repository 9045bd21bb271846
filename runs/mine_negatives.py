"""Mine hard negatives: ``python -m sts_lightning.runs.mine_negatives --pairs <file> --encoder <name> --out <file>``.

Negatives by sentence-transformers' rules, for a file ``data.sources=[<out>] data.format=triplets`` trains on.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import logging
from collections import Counter
from pathlib import Path

from sts_lightning.datamodules.hard_negatives import SAMPLING, MiningOptions, Triplets, mine_triplets
from sts_lightning.datamodules.malformed_rows import MalformedRows
from sts_lightning.datamodules.nli_readers import LABELS, NAME_HINT, load_source, read_nli_tables
from sts_lightning.datamodules.table_files import find_columns, is_file_source, read_tables, text
from sts_lightning.embeddings.encoders.load import load_encoder
from sts_lightning.embeddings.errors import ConfigError, DataError, first_line, run_or_exit
from sts_lightning.embeddings.io.atomic import atomic_write
from sts_lightning.embeddings.methods.pooling import PoolingScorer, get_pooling

log = logging.getLogger(__name__)
OUTPUTS = (".jsonl", ".tsv", ".csv")


def read_pairs(spec: str, data_dir: str | None = None) -> tuple[list[str], list[str]]:
    """(anchors, positives): a pair file's anchor / positive columns, else NLI data's entailed pairs."""
    if is_file_source(spec):
        path, tables = read_tables(spec, data_dir, hint=NAME_HINT)
        found = find_columns(tables[0], "triplets", {})
        if found["anchor"] is None or found["positive"] is None:
            if all(find_columns(tables[0], "nli", {}).values()):
                return _entailed(read_nli_tables(tables, str(path), {}))
            raise DataError(f"{tables[0].path}: no anchor / positive columns (anchor or sent0, positive or sent1) "
                            f"and no premise / hypothesis / label columns; the file has {list(tables[0].columns)}")
        return _pair_rows(tables, str(path))
    return _entailed(load_source(spec, data_dir))


def _pair_rows(tables, source: str) -> tuple[list[str], list[str]]:
    anchors, positives, skipped = [], [], MalformedRows(Counter(), 0.01)
    for table in tables:
        names = find_columns(table, "triplets", {})
        if names["anchor"] is None or names["positive"] is None:
            raise DataError(f"{table.path}: no anchor / positive columns; the file has {list(table.columns)}")
        for i, (a, p) in enumerate(zip(table.columns[names["anchor"]], table.columns[names["positive"]],
                                       strict=True)):
            a, p = text(a).strip(), text(p).strip()
            if not (a and p):
                skipped.skip(table.where(i), "empty sentence")
                continue
            anchors.append(a)
            positives.append(p)
    skipped.check(source, len(anchors))
    if not anchors:
        raise DataError(f"{source}: no (anchor, positive) pairs found")
    return anchors, positives


def _entailed(pairs) -> tuple[list[str], list[str]]:
    rows = [(p, h) for p, h, y in zip(pairs.premises, pairs.hypotheses, pairs.labels, strict=True)
            if y == LABELS["entailment"]]
    if not rows:
        raise DataError(f"{pairs.source}: no entailed pairs to mine negatives for")
    return [p for p, _ in rows], [h for _, h in rows]


def triplet_bytes(triplets: Triplets, suffix: str) -> bytes:
    """The file ``datamodules.table_files`` reads back: columns anchor / positive / negative."""
    rows = list(zip(triplets.anchors, triplets.positives, triplets.negatives, strict=True))
    if suffix == ".jsonl":
        return "".join(json.dumps(dict(zip(("anchor", "positive", "negative"), r, strict=True)), ensure_ascii=False)
                       + "\n" for r in rows).encode()
    if suffix == ".tsv" and any(ch in s for r in rows for s in r for ch in "\t\r\n"):
        raise DataError("a sentence holds a tab or line break, which a .tsv cannot carry: write --out as .jsonl")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n", **({"delimiter": "\t", "quoting": csv.QUOTE_NONE,
                                                          "escapechar": None} if suffix == ".tsv" else {}))
    writer.writerows([("anchor", "positive", "negative"), *rows])
    return buffer.getvalue().encode()


def check_out(out: str) -> str:
    suffix = Path(out).suffix.lower()
    if suffix not in OUTPUTS:
        raise ConfigError(f"--out {out}: write {', '.join(OUTPUTS)} (the triplet files data.sources reads)")
    return suffix


def embedder(name: str, pooling: str, batch_size: int | None, max_length: int | None, device: str):
    """Texts -> pooled vectors of the encoder ``name`` (``evaluate.py``'s loading and pooling, not a copy)."""
    get_pooling(pooling)  # an unknown pooling is named before the weights load
    try:
        encoder = load_encoder(name, max_length=max_length, batch_size=batch_size, device=device)
    except ConfigError as err:
        raise ConfigError(f"--encoder: {first_line(err)}") from err
    scorer = PoolingScorer(encoder, pooling, batch_size=batch_size)
    return lambda texts: scorer.represent(texts)["embedding"].cpu()


def mine(args: argparse.Namespace) -> Triplets:
    options = MiningOptions(args.range_min, args.range_max, args.absolute_margin, args.relative_margin,
                            args.num_negatives, args.sampling, args.seed)
    options.check()
    suffix = check_out(args.out)
    anchors, positives = read_pairs(args.pairs, args.data_dir)
    embed = embedder(args.encoder, args.pooling, args.batch_size, args.max_length, args.device)
    triplets = mine_triplets(anchors, positives, embed, options)
    if not triplets:
        raise DataError("no negatives left after the margins and ranks: lower --absolute-margin / --relative-margin "
                        "or widen --range-max")
    atomic_write(args.out, triplet_bytes(triplets, suffix))
    print(f"{len(triplets)} triplets from {len(anchors)} pairs -> {args.out} "
          f"(train: data.sources=[{args.out}] data.format=triplets)")
    return triplets


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sts_lightning.runs.mine_negatives", description=__doc__.split("\n")[0])
    p.add_argument("--pairs", required=True, help="anchor/positive file (.tsv .csv .jsonl .parquet), or NLI data")
    p.add_argument("--encoder", required=True, help="any encoder evaluate.py accepts (name, directory, .ckpt)")
    p.add_argument("--out", required=True, help="triplet file to write (.jsonl, .tsv or .csv)")
    p.add_argument("--pooling", default="mean")
    p.add_argument("--range-min", type=int, default=0, help="skip the closest ranks (likely unlabeled positives)")
    p.add_argument("--range-max", type=int, default=None, help="consider ranks below this")
    p.add_argument("--absolute-margin", type=float, default=None, help="negative <= positive score - margin")
    p.add_argument("--relative-margin", type=float, default=None, help="negative <= positive - |positive| * margin, in [0, 1)")
    p.add_argument("--num-negatives", type=int, default=3, help="negatives (triplets) per pair")
    p.add_argument("--sampling", default="top", choices=SAMPLING)
    p.add_argument("--seed", type=int, default=0, help="for --sampling random")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--max-length", type=int, default=None)
    p.add_argument("--device", default="auto")
    p.add_argument("--data-dir", default=None, help="where named NLI sources live (default $STS_DATA_DIR)")
    return p


def main(argv: list[str] | None = None) -> None:
    run_or_exit(mine, parser().parse_args(argv))


if __name__ == "__main__":
    main()
