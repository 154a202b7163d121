#!/usr/bin/env python3
"""The figures of `lrmoe compare --plot DIR`, drawn with matplotlib from the results database.

lrmoe writes DIR/comparison.json (the comparison's name, the x axis chosen with --x, the
baseline, and each model's policy variants with the runs of their seeds and, against the
baseline, the reduction of their median time to target as lrmoe compare computes it) and runs
this script, which reads the database read-only and writes PNG and SVG files, per model:

  <model>-loss-vs-<axis>   evaluation loss against the x axis (AXES), one line per variant: the
                           median over seeds where every seed has a value, shaded: the range of
                           the seeds that have one
  <model>-memory           per variant, the seed with the median memory peak: its busiest rank's
                           bytes by category at that peak, printed in MiB, against the per-rank
                           budget (cluster.memory_per_rank)
  <model>-rank-load        per variant (its first seed), the pairs each logical rank computed
                           in every step, over all MoE layers, on one colour scale

and, with a baseline, once for all models:

  <comparison>-reductions  each variant's reduction of the median time to target against the
                           baseline with its 95% bootstrap interval, one group per model

Runs that did not reach the target are drawn like the others: their curves end where they
stopped, above the target line.

The notebooks import it too: sweep_variants asks lrmoe compare for a sweep's variants, and the
plot_* functions draw the same figures (the reductions need lrmoe compare's numbers).
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import sqlite3
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import Normalize  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

MIB = float(1 << 20)
GIB = float(1 << 30)


# What each --x measures: the loss figure's file name, its axis label, which says exactly what
# is summed and where, and a short name for titles (the reductions are of the time to target
# along the same axis).
AXES = {
    "steps": {
        "file": "loss-vs-steps",
        "label": "training steps",
        "short": "steps",
    },
    "critical": {
        # The name the figure had before --x, which docs/ and README.md link.
        "file": "loss-vs-moe-time",
        "label": "cumulative MoE time on the critical path (slowest rank per layer and phase), "
                 "s,\nmeasured on this machine",
        "short": "MoE time on the critical path (measured)",
    },
    "modeled": {
        "file": "loss-vs-modeled-moe-time",
        "label": "cumulative modeled MoE time, s: the cost model under hardware profile "
                 "{profile},\nat the run's size",
        "short": "modeled MoE time",
    },
    "projected": {
        "file": "loss-vs-projected-moe-time",
        "label": "projected MoE time at full size, s: steps x the run's modeled s/step at\n"
                 "{projection} (lrmoe project)",
        "short": "projected full-size MoE time",
    },
}


def slug(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "model"


def model_of(resolved_toml):
    """The model preset a run's resolved experiment names ("custom" without one)."""
    try:
        import tomllib
        return tomllib.loads(resolved_toml).get("model", {}).get("preset", "custom")
    except (ImportError, ValueError):
        match = re.search(r'^preset\s*=\s*"([^"]*)"', resolved_toml, re.MULTILINE)
        return match.group(1) if match else "unknown"


def lrmoe_program():
    """The lrmoe program: LRMOE, else `lrmoe` on the PATH, else the one of this script's build
    tree or install."""
    if os.environ.get("LRMOE"):
        return os.environ["LRMOE"]
    found = shutil.which("lrmoe")
    if found:
        return found
    here = pathlib.Path(__file__).resolve().parent
    for candidate in (here.parent / "build" / "runner" / "lrmoe",  # notebooks/ in a clone
                      here.parent / "lrmoe",                       # build/runner/plotting/
                      here.parents[2] / "bin" / "lrmoe"):          # share/lrmoe/plotting/
        if candidate.exists():
            return str(candidate)
    raise FileNotFoundError("no lrmoe program: set LRMOE to it, or put it on the PATH")


def sweep_variants(db_path, sweep):
    """The last run of each cell of the sweep named `sweep`, grouped by lrmoe compare itself (its
    JSON), so that the notebooks' variants are the table's: a list of {"model", "name", "runs"}."""
    answer = subprocess.run(
        [lrmoe_program(), "compare", "--sweep", sweep, "--db", str(db_path), "--format", "json"],
        capture_output=True, text=True)
    if answer.returncode != 0:
        raise ValueError(f"lrmoe compare --sweep {sweep}: {answer.stderr.strip()}")
    return [{"model": v["model"], "name": v["variant"], "runs": v["run_ids"]}
            for v in json.loads(answer.stdout)]


def loss_curve(db, run, x="critical", seconds_per_step=None):
    """(x, evaluation loss) at the run's evaluations, x as AXES names it; `seconds_per_step`: the
    run's projected MoE seconds per step at full size, for x = "projected"."""
    column = {"critical": "moe_critical_seconds", "modeled": "moe_modeled_seconds"}.get(x, "0")
    rows = db.execute(
        f"SELECT step, {column}, eval_loss FROM steps WHERE run = ? ORDER BY step", (run,)
    ).fetchall()
    if not rows:
        return np.array([]), np.array([])
    steps, seconds, losses = np.array(rows, dtype=float).T  # NULL: NaN
    if x == "steps":
        along = steps
    elif x == "projected":
        along = steps * seconds_per_step  # the projection's per-step mean: linear in steps
    else:
        along = np.cumsum(np.nan_to_num(seconds))  # a step without a time adds none
    evaluated = ~np.isnan(losses)
    return along[evaluated], losses[evaluated]


def seed_band(curves, points=400):
    """The seeds' curves on one x grid: (grid, median, low, high). The median exists only where
    every seed has a value (the intersection of their x ranges): a median over a changing set of
    seeds jumps wherever one starts or ends. Low and high span every seed that has a value there
    (the union). NaN where undefined."""
    starts, ends = [x[0] for x, _ in curves], [x[-1] for x, _ in curves]
    grid = np.unique(np.concatenate(
        [np.linspace(min(starts), max(ends), points), [max(starts), min(ends)]]))
    on_grid = np.array([np.where((grid >= x[0]) & (grid <= x[-1]), np.interp(grid, x, loss), np.nan)
                        for x, loss in curves])
    present = ~np.isnan(on_grid)
    every, some = present.all(axis=0), present.any(axis=0)
    median, low, high = (np.full(grid.shape, np.nan) for _ in range(3))
    median[every] = np.median(on_grid[:, every], axis=0)
    low[some] = np.nanmin(on_grid[:, some], axis=0)
    high[some] = np.nanmax(on_grid[:, some], axis=0)
    return grid, median, low, high


def axis_label(db, x, variants):
    """AXES' label for `x`, with the hardware profile or full-size configuration it names."""
    label = AXES[x]["label"]
    if x == "modeled":
        profiles = {profile_name(db, run) for v in variants for run in v["runs"]}
        return label.format(profile=", ".join(sorted(profiles)))
    if x == "projected":
        return label.format(projection="; ".join(sorted({v["projection"] for v in variants})))
    return label


def profile_name(db, run):
    (toml,) = db.execute("SELECT hardware_profile FROM runs WHERE id = ?", (run,)).fetchone()
    match = re.search(r'^name\s*=\s*"([^"]*)"', toml or "", re.MULTILINE)
    return match.group(1) if match else "none recorded"


def seeds_text(variant, drawn):
    reached = variant.get("reached")
    if reached is None:
        return f"{drawn} seeds"
    return f"{drawn} seeds, {'none' if reached == 0 else reached} reached the target"


def plot_loss(db, model, variants, path, x="critical"):
    """Loss against `x` (AXES); with x = "projected" each variant carries its runs' projected
    seconds per step ("projected_seconds_per_step", None where a run has none: left out)."""
    # Below the plot, an axes of its own for the legend, which covers no data there.
    fig, (ax, key) = plt.subplots(2, 1, layout="constrained")
    targets = set()
    for i, variant in enumerate(variants):
        per_step = variant.get("projected_seconds_per_step", [None] * len(variant["runs"]))
        curves = [loss_curve(db, run, x, seconds) for run, seconds in zip(variant["runs"], per_step)
                  if x != "projected" or seconds is not None]
        curves = [(t, loss) for t, loss in curves if len(t) > 0]
        if not curves:
            continue
        grid, median, low, high = seed_band(curves)
        colour = f"C{i % 10}"  # as in the reductions figure, whether or not others were drawn
        ax.plot(grid, median, color=colour,
                label=f"{variant['name']} ({seeds_text(variant, len(curves))})")
        ax.fill_between(grid, low, high, where=~np.isnan(low), color=colour, alpha=0.2,
                        linewidth=0)
        # Its edges too: where one seed is left the band has no width, and would not show.
        ax.plot(grid, low, grid, high, color=colour, linewidth=0.5, alpha=0.6)
        for run in variant["runs"]:
            (target,) = db.execute("SELECT target_loss FROM runs WHERE id = ?", (run,)).fetchone()
            if target is not None:
                targets.add(target)
    for target in sorted(targets):
        ax.axhline(target, color="black", linestyle="--", linewidth=0.8,
                   label=f"target loss {target:g}")
    ax.set_xlabel(axis_label(db, x, variants))
    ax.set_ylabel("evaluation loss")
    fig.suptitle(f"{model}: evaluation loss against {AXES[x]['short']}")
    ax.set_title("line: median over seeds, only where every seed has a value\n"
                 "shaded, with thin edges: min-max over the seeds that have a value there (to the "
                 "last seed's end)",
                 fontsize=8)
    handles, labels = ax.get_legend_handles_labels()
    key_height = 0.1 + 0.19 * len(labels)  # inches: a line of 8-point text per entry
    fig.set_size_inches(8, 5 + key_height)
    ax.get_gridspec().set_height_ratios([5, key_height])
    key.axis("off")
    key.legend(handles, labels, loc="upper center", fontsize=8, frameon=False)
    return save(fig, path)


# The categories of a rank's memory (Note [Memory model]), bottom up: first what every policy
# holds nearly alike, in greys, then the paper's subtotal, which the policies change.
MEMORY = [("dense", "dense state and activations", "#c7c7c7"),
          ("optimizer", "experts' Adam state", "#a5a5a5"),
          ("gradients", "gradients", "#8a8a8a"),
          ("owned", "owned experts", "tab:blue"),
          ("replicas", "replicas", "tab:orange"),
          ("forward_tokens", "forward token buffers", "tab:green"),
          ("backward_tokens", "backward token buffers", "tab:red")]
BAR_WIDTH = 0.5


def busiest_peak(db, run):
    """(bytes by MEMORY category, per-rank budget in bytes or None) of the rank and step with
    the largest modeled total of the run; None when it recorded no memory."""
    columns = [name for name, _, _ in MEMORY]
    row = db.execute(
        f"SELECT {', '.join(columns)} FROM rank_memory WHERE run = ? "
        f"ORDER BY {' + '.join(columns)} DESC LIMIT 1", (run,)).fetchone()
    if row is None:
        return None
    (budget,) = db.execute("SELECT memory_per_rank FROM runs WHERE id = ?", (run,)).fetchone()
    return np.array(row, dtype=float), budget


def plot_memory(db, model, variants, path):
    """Per variant, its seed with the median total at the peak (a real seed, so that the stack
    adds up to its printed total), stacked by category, against the per-rank budget, which
    bounds that total (Note [Memory model])."""
    bars = []  # (variant name, MiB by category of the median seed, the seeds' totals, budget)
    for variant in variants:
        peaks = [p for p in (busiest_peak(db, run) for run in variant["runs"]) if p is not None]
        if not peaks:
            continue
        totals = np.array([categories.sum() for categories, _ in peaks])
        categories, budget = peaks[np.argsort(totals)[(len(totals) - 1) // 2]]  # lower median
        bars.append((variant["name"], categories / MIB, totals / MIB, budget))
    if not bars:
        return []
    fig, ax = plt.subplots(figsize=(3.5 + 1.6 * len(bars), 5.5), layout="constrained")
    tallest = max(totals.max() for _, _, totals, _ in bars)
    decimals = max(1, 2 - int(np.floor(np.log10(tallest))))  # three digits at the tallest bar
    top = draw_budgets(ax, bars, tallest)
    for x, (_, mib, totals, _) in enumerate(bars):
        bottoms = np.concatenate([[0], np.cumsum(mib)[:-1]])
        for (_, label, colour), height, bottom in zip(MEMORY, mib, bottoms):
            ax.bar(x, height, BAR_WIDTH, bottom=bottom, color=colour, label=label)
        label_segments(ax, x, mib, bottoms, top, decimals)
        # The seeds' range of totals, and the total of the seed drawn.
        ax.errorbar(x, mib.sum(), yerr=[[mib.sum() - totals.min()], [totals.max() - mib.sum()]],
                    color="black", capsize=3, linewidth=0.8)
        ax.text(x, totals.max() + 0.01 * top, f"{mib.sum():.{decimals}f} MiB", ha="center", va="bottom",
                fontsize=8, fontweight="bold")
    ax.set_ylim(0, top)
    ax.set_xlim(-0.6, len(bars) - 0.4)
    ax.set_xticks(range(len(bars)), [tick_label(name) for name, _, _, _ in bars], fontsize=8)
    ax.set_ylabel("MiB of one rank at its memory peak")
    fig.suptitle(f"{model}: memory of the busiest rank at its peak (modeled), by category")
    ax.set_title("bars: each variant's seed with the median peak, values in MiB; whisker: the "
                 "seeds' range of totals", fontsize=8)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels[::-1], handles[::-1]))  # top to bottom as stacked
    ax.legend(unique.values(), unique.keys(), loc="upper left", bbox_to_anchor=(1.01, 1),
              fontsize=8, frameon=False)
    return save(fig, path)


def tick_label(name):
    """A variant's name in lines that fit under its bar: one setting a line, a long one broken
    after its "="."""
    return "\n".join(part.replace("=", "=\n") if len(part) > 22 else part
                     for part in name.split(", "))


def label_segments(ax, x, mib, bottoms, top, decimals):
    """Each segment's MiB: inside it where it fits, else beside the bar, moved up as little as
    keeps the labels apart, with a leader line to the segment; none where it would read 0."""
    gap = 0.03 * top  # a label's height at this size
    above = -np.inf
    for height, bottom in zip(mib, bottoms):
        middle, text = bottom + height / 2, f"{height:.{decimals}f}"
        if height >= gap:
            ax.text(x, middle, text, ha="center", va="center", fontsize=7)
        elif round(height, decimals) > 0:
            y = max(middle, above + gap)
            above = y
            edge = x + BAR_WIDTH / 2
            ax.plot([edge, edge + 0.06], [middle, y], color="black", linewidth=0.5)
            ax.text(edge + 0.07, y, text, ha="left", va="center", fontsize=7)


def draw_budgets(ax, bars, tallest):
    """Each variant's per-rank budget as a dashed line across its bar, and the y axis's top.
    A budget far above the bars (80 GiB beside 130 MiB, which a line at scale would flatten
    every bar under) is written instead, "off scale"."""
    top = tallest * 1.15
    for x, (_, _, _, budget) in enumerate(bars):
        if budget is None:
            continue
        mib = budget / MIB
        text = f"budget {budget / GIB:.0f} GiB" if budget >= GIB else f"budget {mib:.1f} MiB"
        if mib <= 1.5 * tallest:
            ax.hlines(mib, x - 0.4, x + 0.4, colors="black", linestyles="--", linewidth=1.2,
                      label="per-rank budget (cluster.memory_per_rank)")
            ax.text(x + 0.4, mib + 0.005 * tallest, text, ha="right", va="bottom", fontsize=7)
            top = max(top, mib * 1.1)
        else:
            ax.text(x, tallest * 1.07, f"{text} (off scale)", ha="center", va="bottom",
                    fontsize=7, style="italic")
    return top


def plot_rank_load(db, model, variants, path):
    loads = []
    for variant in variants:
        run = variant["runs"][0]
        rows = db.execute(
            "SELECT step, rank, sum(forward_pairs) FROM rank_layer_steps WHERE run = ? "
            "GROUP BY step, rank ORDER BY step, rank",
            (run,),
        ).fetchall()
        if rows:
            steps = max(r[0] for r in rows)
            ranks = max(r[1] for r in rows) + 1
            matrix = np.zeros((ranks, steps))
            for step, rank, pairs in rows:
                matrix[rank, step - 1] = pairs
            loads.append((f"{variant['name']} (run {run}, its first seed: {steps} steps)", matrix))
    if not loads:
        return []
    # One colour scale for every variant, so that equal colours are equal loads.
    norm = Normalize(vmin=min(m.min() for _, m in loads),
                                       vmax=max(m.max() for _, m in loads))
    most_ranks = max(m.shape[0] for _, m in loads)
    fig, axes = plt.subplots(len(loads), 1, sharex=True, squeeze=False, layout="constrained",
                             figsize=(8, 1.3 + (0.6 + 0.18 * most_ranks) * len(loads)))
    for ax, (name, matrix) in zip(axes[:, 0], loads):
        ranks, steps = matrix.shape
        image = ax.imshow(matrix, aspect="auto", interpolation="nearest", cmap="viridis", norm=norm,
                          extent=(0.5, steps + 0.5, ranks - 0.5, -0.5))
        ax.set_title(name, fontsize=9)
        ax.set_yticks(range(ranks), [str(r) for r in range(ranks)],
                      fontsize=8 if ranks <= 16 else 5)
        ax.set_ylabel("rank", fontsize=8)
    # Shared, so that a step is a step in every panel; imshow would keep only the last one's.
    axes[-1, 0].set_xlim(0.5, max(m.shape[1] for _, m in loads) + 0.5)
    axes[-1, 0].set_xlabel("training step")
    fig.colorbar(image, ax=axes[:, 0].tolist(), label="token-expert pairs computed")
    fig.suptitle(f"{model}: pairs computed per logical rank and step (all MoE layers)")
    return save(fig, path)


def plot_reductions(spec, path):
    """One panel per model, one row per variant: lrmoe compare's reduction of the median time to
    target along spec["x"] against the baseline, with its 95% bootstrap interval, as
    comparison.json carries them (null: minus infinity). A variant whose median is not finite
    (half its seeds or more missed the target) has no bar: "not reached". Models without the
    baseline variant are left out. Horizontal, so that long variant names stay readable."""
    baseline = spec["baseline"]
    groups = []  # (model, its variants, each with its colour in the model's loss figure)
    for model in dict.fromkeys(v["model"] for v in spec["variants"]):
        of_model = [v for v in spec["variants"] if v["model"] == model]
        if any(v["name"] == baseline for v in of_model):
            groups.append((model, [(v, f"C{i % 10}") for i, v in enumerate(of_model)
                                   if v["name"] != baseline]))
    names = list(dict.fromkeys(v["name"] for _, variants in groups for v, _ in variants))
    if not names:
        return []
    fig, axes = plt.subplots(1, len(groups), sharex=True, sharey=True, squeeze=False,
                             layout="constrained",
                             figsize=(2.5 + 3.8 * len(groups), 2.4 + 0.42 * len(names)))
    unbounded = []  # (axes, row, estimate) of intervals without a lower end
    for ax, (model, variants) in zip(axes[0], groups):
        for v, colour in variants:
            row, r = names.index(v["name"]), v.get("reduction")
            if r is None or r["estimate"] is None:
                why = "not reached" if r is not None else "no reduction: the baseline's not reached"
                ax.text(0.5, row, f"{why}: {v['reached']} of {len(v['runs'])} seeds reached the target",
                        transform=blended_transform_factory(ax.transAxes, ax.transData),
                        ha="center", va="center", fontsize=8, color=colour, fontweight="bold",
                        bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
                continue
            estimate = 100 * r["estimate"]
            low, high = (None if r[b] is None else 100 * r[b] for b in ("low", "high"))
            ax.barh(row, estimate, 0.6, color=colour)
            ax.errorbar(estimate, row, color="black", capsize=3, linewidth=1,
                        xerr=[[0 if low is None else estimate - low],
                              [0 if high is None else high - estimate]])
            if low is None:
                unbounded.append((ax, row, estimate))
            interval = ", ".join("-inf" if b is None else f"{b:+.0f}" for b in (low, high))
            # On the other side of zero from the bar, where neither it nor its interval is.
            ax.text(0, row, f" {estimate:+.0f}% [{interval}] ",
                    ha="left" if estimate < 0 else "right", va="center", fontsize=8, zorder=5,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0})
        ax.set_title(model)
        ax.axvline(0, color="black", linewidth=0.8, zorder=6)  # through the labels at zero
        ax.set_xlabel(f"reduction against {baseline}, %")
    # Zero in view with room on both sides for the labels.
    left, right = axes[0, 0].get_xlim()
    axes[0, 0].set_xlim(min(left, -0.6 * right), max(right, -0.6 * left))
    for ax, row, estimate in unbounded:  # to the axis's end, as an arrow: the interval goes on
        ax.annotate("", xy=(ax.get_xlim()[0], row), xytext=(estimate, row),
                    arrowprops={"arrowstyle": "->", "color": "black"})
    axes[0, 0].set_yticks(range(len(names)), names, fontsize=8)
    axes[0, 0].invert_yaxis()  # the variants top down, in the comparison's order
    fig.suptitle(f"{spec['name']}: median {AXES[spec['x']]['short']} to target,\n"
                 f"reduction against {baseline} (1 - variant / baseline)")
    caption = ("bars: lrmoe compare's reductions; error bars: their 95% bootstrap interval over "
               "seeds;\nright of 0: the variant reaches the target sooner")
    if unbounded:
        caption += "; arrow: the interval is unbounded (resamples whose median missed the target)"
    fig.text(0.5, 0, caption, ha="center", va="top", fontsize=8)
    return save(fig, path)


def save(fig, path):
    written = []
    for suffix in (".png", ".svg"):
        target = path.with_suffix(suffix)
        fig.savefig(target, dpi=150, bbox_inches="tight")  # nothing clipped at the edges
        written.append(target)
    plt.close(fig)
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--spec", required=True, help="comparison.json written by lrmoe compare")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    spec = json.loads(pathlib.Path(args.spec).read_text())
    x = spec.get("x", "critical")
    out = pathlib.Path(args.out)
    db = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    by_model = {}
    for variant in spec["variants"]:
        by_model.setdefault(variant["model"], []).append(variant)
    for model, variants in by_model.items():
        base = out / slug(model)
        for draw, name in ((lambda *a: plot_loss(*a, x=x), AXES[x]["file"]),
                           (plot_memory, "memory"), (plot_rank_load, "rank-load")):
            for path in draw(db, model, variants, base.with_name(f"{base.name}-{name}")):
                print(path)
    if spec.get("baseline"):
        for path in plot_reductions(spec, out / f"{slug(spec['name'])}-reductions"):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
