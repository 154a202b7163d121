#!/usr/bin/env python3
"""The figures of `lrmoe compare --plot DIR`, drawn with matplotlib from the results database.

lrmoe writes DIR/comparison.json (each model's policy variants and the runs of their seeds) and
runs this script, which reads the database read-only and writes, per model, PNG and SVG files:

  <model>-loss-vs-moe-time   evaluation loss against cumulative MoE time on the critical path,
                             one line per variant: the median over seeds, shaded: their range
  <model>-memory             per variant, the bytes by category at the busiest rank's memory
                             peak (median over seeds), stacked
  <model>-rank-load          per variant (its first seed), the pairs each logical rank computed
                             in every step, over all MoE layers

Runs that did not reach the target are drawn like the others: their curves end where they
stopped, above the target line.

The notebooks import it too: sweep_variants groups a sweep's runs as lrmoe compare does, and the
plot_* functions draw the same figures.
"""

import argparse
import json
import math
import pathlib
import re
import sqlite3
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

MIB = float(1 << 20)
CATEGORIES = ["owned", "replicas", "forward_tokens", "backward_tokens"]


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


def sweep_variants(db, sweep):
    """The last run of each cell of the sweep named `sweep`, grouped as lrmoe compare groups them:
    per model, one variant per cell settings without experiment.seed and model.preset, named "key=value, ..." by
    each key's last part. A list of {"model", "name", "runs"} in cell order."""
    found = db.execute("SELECT id FROM sweeps WHERE name = ?", (sweep,)).fetchone()
    if found is None:
        names = [name for (name,) in db.execute("SELECT name FROM sweeps ORDER BY id")]
        raise ValueError(f"no sweep {sweep!r} in the database; its sweeps: {names}")
    variants = {}
    for cell, run in db.execute(
        "SELECT cell, max(run) FROM sweep_runs WHERE sweep = ? GROUP BY cell ORDER BY cell",
        (found[0],),
    ).fetchall():
        values = db.execute(
            "SELECT key, value FROM sweep_cell_values WHERE sweep = ? AND cell = ? "
            "ORDER BY position",
            (found[0], cell),
        ).fetchall()
        name = ", ".join(f"{key.rsplit('.', 1)[-1]}={value}" for key, value in values
                         if key not in ("experiment.seed", "model.preset")) or "all"
        (toml,) = db.execute("SELECT resolved_toml FROM runs WHERE id = ?", (run,)).fetchone()
        variant = variants.setdefault((model_of(toml), name),
                                      {"model": model_of(toml), "name": name, "runs": []})
        variant["runs"].append(run)
    return list(variants.values())


def loss_curve(db, run):
    """(cumulative MoE critical-path seconds, evaluation loss) at the run's evaluations."""
    times, losses, elapsed = [], [], 0.0
    for seconds, loss in db.execute(
        "SELECT moe_critical_seconds, eval_loss FROM steps WHERE run = ? ORDER BY step", (run,)
    ):
        elapsed += seconds if seconds is not None and not math.isnan(seconds) else 0.0
        if loss is not None:
            times.append(elapsed)
            losses.append(loss)
    return np.array(times), np.array(losses)


def plot_loss(db, model, variants, path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    targets = set()
    for variant in variants:
        curves = [loss_curve(db, run) for run in variant["runs"]]
        curves = [(t, l) for t, l in curves if len(t) > 0]
        if not curves:
            continue
        grid = np.linspace(0.0, max(t[-1] for t, _ in curves), 200)
        # Each seed on the common grid, only within the times it covers.
        on_grid = np.array(
            [np.where((grid >= t[0]) & (grid <= t[-1]), np.interp(grid, t, l), np.nan)
             for t, l in curves]
        )
        covered = ~np.all(np.isnan(on_grid), axis=0)
        with np.errstate(all="ignore"):
            median = np.nanmedian(on_grid[:, covered], axis=0)
            low = np.nanmin(on_grid[:, covered], axis=0)
            high = np.nanmax(on_grid[:, covered], axis=0)
        label = f"{variant['name']} ({len(curves)} seeds)"
        line, = ax.plot(grid[covered], median, label=label)
        ax.fill_between(grid[covered], low, high, color=line.get_color(), alpha=0.2)
        for run in variant["runs"]:
            (target,) = db.execute("SELECT target_loss FROM runs WHERE id = ?", (run,)).fetchone()
            if target is not None:
                targets.add(target)
    for target in targets:
        ax.axhline(target, color="black", linestyle="--", linewidth=0.8, label=f"target {target}")
    ax.set_xlabel("cumulative MoE-layer time on the critical path (s)")
    ax.set_ylabel("evaluation loss")
    ax.set_title(f"{model}: evaluation loss against MoE time\n(median over seeds, shaded: range)")
    ax.legend(fontsize=8)
    return save(fig, path)


def plot_memory(db, model, variants, path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    names, medians = [], []
    for variant in variants:
        rows = []
        for run in variant["runs"]:
            row = db.execute(
                "SELECT owned, replicas, forward_tokens, backward_tokens FROM rank_memory "
                "WHERE run = ? ORDER BY owned + replicas + gradients + optimizer + forward_tokens"
                " + backward_tokens + dense DESC LIMIT 1",
                (run,),
            ).fetchone()
            if row is not None:
                rows.append(row)
        if rows:
            names.append(variant["name"])
            medians.append(np.median(np.array(rows, dtype=float), axis=0) / MIB)
    if not names:
        plt.close(fig)
        return []
    bottom = np.zeros(len(names))
    for i, category in enumerate(CATEGORIES):
        heights = np.array([m[i] for m in medians])
        ax.bar(names, heights, bottom=bottom, label=category)
        bottom += heights
    ax.set_ylabel("MiB at the busiest rank's memory peak (median over seeds)")
    ax.set_title(f"{model}: memory subtotal by category")
    ax.legend(fontsize=8)
    plt.setp(ax.get_xticklabels(), rotation=20, ha="right", fontsize=8)
    return save(fig, path)


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
            loads.append((f"{variant['name']} (run {run})", matrix))
    if not loads:
        return []
    fig, axes = plt.subplots(len(loads), 1, figsize=(7, 1.2 + 1.4 * len(loads)), squeeze=False)
    for ax, (name, matrix) in zip(axes[:, 0], loads):
        steps, ranks = matrix.shape[1], matrix.shape[0]
        image = ax.imshow(matrix, aspect="auto", interpolation="nearest", cmap="viridis",
                          extent=(0.5, steps + 0.5, ranks - 0.5, -0.5))
        ax.set_title(name, fontsize=9)
        ax.set_ylabel("rank")
        fig.colorbar(image, ax=ax, label="pairs")
    axes[-1, 0].set_xlabel("step")
    fig.suptitle(f"{model}: pairs computed per logical rank and step (all MoE layers)")
    return save(fig, path)


def save(fig, path):
    fig.tight_layout()
    written = []
    for suffix in (".png", ".svg"):
        target = path.with_suffix(suffix)
        fig.savefig(target, dpi=150)
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
    out = pathlib.Path(args.out)
    db = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True)
    by_model = {}
    for variant in spec["variants"]:
        by_model.setdefault(variant["model"], []).append(variant)
    for model, variants in by_model.items():
        base = out / slug(model)
        for draw, name in ((plot_loss, "loss-vs-moe-time"), (plot_memory, "memory"),
                           (plot_rank_load, "rank-load")):
            for path in draw(db, model, variants, base.with_name(f"{base.name}-{name}")):
                print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
