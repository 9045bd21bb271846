"""Draw docs/layers.png, the layer picture of docs/architecture.md: ``.venv/bin/python docs/draw_layers.py``.

Why a script: the picture must change when tests/layering.py's LAYERS change; redraw it instead of editing a PNG.
Boxes are packages, rows are layers (top imports down, never up or sideways); rows read from LAYERS' order.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

OUT = Path(__file__).resolve().with_name("layers.png")

# (layer label, colour, [(box text, width)]) from top to bottom; widths in data units of a 12-wide canvas.
ROWS = [
    ("3  entry points + orchestration", "#dbe9f6",
     [("train.py\nevaluate.py", 2.2), ("runs/\nlaunch, train_run, pipeline_run,\nevaluate_run, trainer_setup, wandb_*", 5.0),
      ("benchmarks/\nspeed + quality scripts", 3.0)]),
    ("2  Lightning (siblings never import each other)", "#e3f1dc",
     [("callbacks/\nsts_evaluation, last_checkpoint,\nrng_state, progress_log", 3.4),
      ("lightning_modules/\none file per method + base,\nfrozen_encoder, losses", 3.4),
      ("datamodules/\nloader (ResumableDataModule)\n+ one per kind of data", 3.4)]),
    ("1  STS data + metrics", "#fdf0d5",
     [("sts/\nreaders, hub, tasks, scoring, report, leaks", 10.6)]),
]
EMBEDDINGS = [("io/", "atomic, export_dir,\nnpy_cache, cache_root,\nfingerprint, st_export"),
              ("encoders/", "base, hf, static,\ncheckpoint, load,\npackaged, onnx_bert"),
              ("scoring/", "scorer, similarity,\nregistry, shared_pass,\nprotocols"),
              ("sources/", "sentence_source,\nbuild, cache"),
              ("methods/", "pooling, sbert_wk,\nsen2pro/, flow/,\nlatte_mix/, meta/")]


def box(ax, x, y, w, h, text, colour, size=9, weight="normal"):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.12",
                                fc=colour, ec="#444444", lw=1.0))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, weight=weight, family="monospace")


def arrow(ax, x, y0, y1):
    ax.add_patch(FancyArrowPatch((x, y0), (x, y1), arrowstyle="-|>", mutation_scale=16, lw=1.6, color="#333333"))


def main() -> None:
    fig, ax = plt.subplots(figsize=(12, 9.6))
    ax.set_xlim(0, 12)
    ax.set_ylim(0, 11.75)
    ax.axis("off")
    row_h, gap, top = 1.55, 0.75, 11.4
    for i, (label, colour, boxes) in enumerate(ROWS):
        y = top - row_h - i * (row_h + gap)
        ax.text(0.7, y + row_h + 0.08, label, fontsize=9, style="italic", color="#555555", va="bottom")
        space = (10.6 - sum(w for _, w in boxes)) / max(len(boxes) - 1, 1)
        x = 0.7
        for text, w in boxes:
            box(ax, x, y, w, row_h, text, colour, size=8.5)
            x += w + space
        for ax_x in (6.0, 8.2, 10.4):  # right of the layer labels
            arrow(ax, ax_x, y - 0.04, y - gap + 0.06)
    # layer 0: embeddings/ with its subpackages
    y0 = top - len(ROWS) * (row_h + gap) - 2.75
    ax.text(0.7, y0 + 2.9 + 0.08, "0  Lightning-free library", fontsize=9, style="italic", color="#555555", va="bottom")
    ax.add_patch(FancyBboxPatch((0.7, y0), 10.6, 2.9, boxstyle="round,pad=0.02,rounding_size=0.15",
                                fc="#f4e1ee", ec="#444444", lw=1.2))
    ax.text(6.0, y0 + 2.62, "embeddings/   (+ errors.py, console.py)", ha="center", fontsize=10, weight="bold",
            family="monospace")
    w, space = 1.9, 0.2
    x0 = 6.0 - (len(EMBEDDINGS) * w + (len(EMBEDDINGS) - 1) * space) / 2
    for j, (name, text) in enumerate(EMBEDDINGS):
        x = x0 + j * (w + space)
        box(ax, x, y0 + 0.2, w, 2.1, f"{name}\n\n{text}", "#fbf3f8", size=7.5)
    ax.text(6.0, 0.05, "Arrows point the only way imports may go: down (any lower layer, not only the next one).\n"
            "embeddings/ and sts/ never import Lightning: `python evaluate.py` loads no Lightning code.\n"
            "Checked by tests/test_layering.py (rules in tests/layering.py): no upward, sideways, lightning,\n"
            "in-function (first-party, except train.py / evaluate.py deferring runs.*) or cyclic import.",
            ha="center", va="bottom", fontsize=9, color="#8b0000")
    ax.set_title("sts-lightning: layers (imports point down only)", fontsize=13, weight="bold")
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.96)
    fig.savefig(OUT, dpi=110, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
