#!/usr/bin/env python3
"""Where each arm's step is cheaper: the modeled MoE time per step of fixed ownership at capacity
factor 1.0, SYMI as published and LRMoE, replayed at full dimensions over a grid of routing skew,
tokens per rank, memory budget, ranks and hardware profile (no training; every figure is the plan's
and the cost model's, so it does not depend on the machine that runs it).

    python3 experiments/paper/per-step-map.py --db per-step-map.db            # run what is missing
    python3 experiments/paper/per-step-map.py --db per-step-map.db --csv map.csv  # and tabulate
    python3 experiments/paper/per-step-map.py --db per-step-map.db --csv map.csv --no-run

Each grid cell is one `lrmoe replay --record map-...` into the database, found again by its name,
so the script resumes where it stopped. The table has, per cell and arm: whether it fits, the
modeled seconds per steady step (SYMI's history-less first step left out) and their parts
(compute, all-to-all, the plan's collectives, parameter transfers, less what overlaps), and the
share of the routed pairs dropped in forward and kept in backward.

LRMoE has one arm: its variants (importance sampling, quotas by score mass) keep as many pairs on
each rank as the literal one, so their modeled steps are its own; they differ in which pairs,
which only training can price (experiments/paper/lrmoe-variants.toml).
"""

import argparse
import csv
import fcntl
import itertools
import pathlib
import sqlite3
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
MODELS = {"qwen3-30b-a3b": HERE / "qwen3-30b-a3b-replay.toml",
          "glm45-air": HERE / "glm45-air-replay.toml"}
ARMS = {
    # DeepSpeed's drop rule, the static baseline of SYMI's paper.
    "fixed-cf1": "policies.bundle=fixed,policies.placement.fixed_ownership.capacity_factor=1.0,"
                 "policies.placement.fixed_ownership.drop=random",
    "symi": "policies.bundle=symi",
    "lrmoe": "policies.bundle=lrmoe",
}


def numbers(text, kind=float):
    return [kind(x) for x in text.split(",") if x]


def cell_name(model, profile, ranks, tokens, skew, budget):
    return f"map-{model}-{profile}-r{ranks}-t{tokens}-z{skew:g}-b{budget:g}"


def recorded(db, name):
    """Whether every arm of cell `name` has ended (fitted or not); a cell a stopped replay left
    half recorded is run again."""
    if not pathlib.Path(db).exists():
        return False
    with sqlite3.connect(db) as c:
        try:
            ended = c.execute("SELECT count(DISTINCT label) FROM sweep_results WHERE sweep = ? "
                              "AND status IN ('finished', 'failed')", (name,)).fetchone()[0]
        except sqlite3.OperationalError:  # no table yet
            return False
    return ended == len(ARMS)


def replay(args, model, profile, ranks, tokens, skew, budget):
    name = cell_name(model, profile, ranks, tokens, skew, budget)
    if recorded(args.db, name):
        return
    command = [args.lrmoe, "replay", str(MODELS[model]), "--skew", f"zipf:{skew:g}",
               "--steps", str(args.steps), "--db", args.db, "--record", name,
               "--set", f"cluster.ranks={ranks}", "--set", f"cluster.profile={profile}",
               "--set", f"train.batch_size={ranks}", "--set", f"train.seq_len={tokens}",
               "--set", f"cluster.memory_per_rank={budget:g}x fixed"]
    for label, settings in ARMS.items():
        command += ["--variant", f"{label}:{settings}"]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        sys.exit(f"per-step-map: {name}: lrmoe replay exited {done.returncode}:\n{done.stdout}")
    print(name, flush=True)


# Per run: steady steps' modeled seconds per step (every MoE layer) and its parts.
STEADY = """
SELECT count(DISTINCT step),
       sum(modeled_seconds), sum(modeled_compute_seconds), sum(modeled_all_to_all_seconds),
       sum(modeled_gather_seconds), sum(modeled_replica_seconds),
       sum(modeled_overlapped_seconds),
       sum(pairs_dropped), sum(pairs_kept), sum(pairs_routed)
FROM moe_layer_steps
WHERE run = ? AND step NOT IN (SELECT step FROM moe_layer_steps
                               WHERE run = ? AND placement_information = 'warm-up')
"""


def tabulate(args):
    rows = []
    with sqlite3.connect(args.db) as c:
        for model, profile, ranks, tokens, skew, budget in grid(args):
            name = cell_name(model, profile, ranks, tokens, skew, budget)
            for label, run, status in c.execute(
                    "SELECT label, run, status FROM sweep_results WHERE sweep = ? "
                    "AND status IN ('finished', 'failed')", (name,)):
                row = dict(model=model, profile=profile, ranks=ranks, tokens_per_rank=tokens,
                           skew=skew, budget=budget, arm=label, fits=status == "finished")
                if row["fits"]:
                    steps, total, comp, a2a, gath, trans, over, dropped, kept, routed = \
                        c.execute(STEADY, (run, run)).fetchone()
                    row.update(modeled_s_per_step=total / steps, compute=comp / steps,
                               all_to_all=a2a / steps, gathers=gath / steps,
                               transfers=trans / steps, overlapped=over / steps,
                               dropped_fwd=dropped / routed, kept_bwd=kept / routed)
                rows.append(row)
    fields = ["model", "profile", "ranks", "tokens_per_rank", "skew", "budget", "arm", "fits",
              "modeled_s_per_step", "compute", "all_to_all", "gathers", "transfers", "overlapped",
              "dropped_fwd", "kept_bwd"]
    with open(args.csv, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} rows in {args.csv}")


def grid(args):
    return itertools.product(args.models, args.profiles, numbers(args.ranks, int),
                             numbers(args.tokens, int), numbers(args.skews),
                             numbers(args.budgets))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="results database (resumable)")
    parser.add_argument("--lrmoe", default=str(HERE / "../../build/runner/lrmoe"))
    parser.add_argument("--models", default="qwen3-30b-a3b,glm45-air")
    parser.add_argument("--profiles", default="h100-sxm-8gpu-ib400,h200-sxm-8gpu-ib400")
    parser.add_argument("--ranks", default="16,64")
    parser.add_argument("--tokens", default="256,1024,4096,8192", help="tokens per rank")
    parser.add_argument("--skews", default="0,0.4,0.8,1.2", help="zipf exponents")
    parser.add_argument("--budgets", default="0.9,1.0,1.2,1.5,2.0", help="x fixed")
    parser.add_argument("--steps", type=int, default=3, help="steps per replay (SYMI's first is "
                        "its warm-up, left out)")
    parser.add_argument("--csv", help="write the table here, after running what is missing")
    parser.add_argument("--no-run", action="store_true",
                        help="only tabulate what is recorded (with --csv), while a run goes on")
    args = parser.parse_args()
    args.models = [m for m in args.models.split(",") if m]
    args.profiles = [p for p in args.profiles.split(",") if p]
    for unknown in set(args.models) - set(MODELS):
        sys.exit(f"per-step-map: --models: unknown model '{unknown}'; known: {', '.join(MODELS)}")
    if args.no_run:
        if not args.csv:
            sys.exit("per-step-map: --no-run only writes the table: give --csv")
        tabulate(args)
        return
    # One driver per database at a time: two would both find a cell missing and run it.
    lock = open(args.db + ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(f"per-step-map: another per-step-map.py is running on {args.db}; wait for it")
    for cell in grid(args):
        replay(args, *cell)
    if args.csv:
        tabulate(args)


if __name__ == "__main__":
    main()
