#!/usr/bin/env python3
"""The per-step map: where LRMoE's modeled MoE step is cheaper than SYMI's, from the table of
experiments/paper/per-step-map.py (--csv).

    /usr/bin/python3 notebooks/per_step_map.py map.csv OUT_DIR

writes OUT_DIR/per-step-map-<model>.png (and .svg), one per model: a panel per (ranks, hardware
profile) and tokens per rank, skew across, budget up; each cell coloured by LRMoE's modeled seconds
per step over SYMI's (log scale; blue where LRMoE's step is cheaper) and printed with the ratio.
A cell where an arm does not fit the budget says which ("no LRMoE", "no SYMI").
"""

import collections
import csv
import math
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import TwoSlopeNorm  # noqa: E402


def load(path):
    cells = collections.defaultdict(dict)  # (model, profile, ranks, tokens, skew, budget) -> arm
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            key = (row["model"], row["profile"], int(row["ranks"]), int(row["tokens_per_rank"]),
                   float(row["skew"]), float(row["budget"]))
            seconds = row["modeled_s_per_step"]
            cells[key][row["arm"]] = float(seconds) if row["fits"] == "True" and seconds else None
    return cells


def draw(cells, model, out):
    keys = [k for k in cells if k[0] == model]
    columns = sorted({(k[2], k[1]) for k in keys})  # (ranks, profile)
    tokens = sorted({k[3] for k in keys})
    skews = sorted({k[4] for k in keys})
    budgets = sorted({k[5] for k in keys})
    norm = TwoSlopeNorm(vmin=-2, vcenter=0, vmax=2)  # log2 of the ratio
    fig, axes = plt.subplots(len(tokens), len(columns), squeeze=False,
                             figsize=(3.2 * len(columns), 2.6 * len(tokens)))
    for i, t in enumerate(tokens):
        for j, (ranks, profile) in enumerate(columns):
            ax = axes[i][j]
            grid = [[math.nan] * len(skews) for _ in budgets]
            for y, b in enumerate(budgets):
                for x, s in enumerate(skews):
                    arms = cells.get((model, profile, ranks, t, s, b), {})
                    lrmoe, symi = arms.get("lrmoe"), arms.get("symi")
                    if lrmoe and symi:
                        grid[y][x] = math.log2(lrmoe / symi)
                        label = f"{lrmoe / symi:.2f}"
                    else:
                        label = " ".join(name for name, v in (("no LRMoE", lrmoe), ("no SYMI", symi))
                                         if v is None and arms)
                    ax.text(x, y, label, ha="center", va="center", fontsize=6)
            ax.imshow(grid, origin="lower", cmap="coolwarm", norm=norm, aspect="auto")
            ax.set_xticks(range(len(skews)), [f"{s:g}" for s in skews], fontsize=7)
            ax.set_yticks(range(len(budgets)), [f"{b:g}x" for b in budgets], fontsize=7)
            ax.set_title(f"{ranks} ranks, {profile.split('-')[0]}, {t} tokens/rank", fontsize=8)
            if i == len(tokens) - 1:
                ax.set_xlabel("zipf skew", fontsize=7)
            if j == 0:
                ax.set_ylabel("budget (x fixed)", fontsize=7)
    fig.suptitle(f"{model}\nLRMoE's modeled MoE step over SYMI's\n(blue: LRMoE's is cheaper)",
                 fontsize=9)
    fig.tight_layout()
    for suffix in ("png", "svg"):
        fig.savefig(out / f"per-step-map-{model}.{suffix}", dpi=130)
    plt.close(fig)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: per_step_map.py MAP.csv OUT_DIR")
    cells = load(sys.argv[1])
    out = pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for model in sorted({k[0] for k in cells}):
        draw(cells, model, out)
        print(out / f"per-step-map-{model}.png")


if __name__ == "__main__":
    main()
