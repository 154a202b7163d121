#include "store/schema_migrations.hpp"

#include <array>
#include <cstddef>

namespace lrmoe::store {
namespace {

// Append only: a migration that has shipped never changes, because databases in the field have
// already run it. Migration N leaves the file at user_version N.
//
// SQLite stores NaN as NULL, so the REAL columns of `steps` are nullable: a diverged step (NaN
// loss) must still be written. Times are UTC text 'YYYY-MM-DDTHH:MM:SS.mmmZ'. `seed` holds the
// unsigned 64-bit seed's bit pattern (SQLite integers are signed).
constexpr std::array kMigrations = {
    Migration{1, R"sql(
CREATE TABLE runs (
  id               INTEGER PRIMARY KEY,
  name             TEXT NOT NULL,
  status           TEXT NOT NULL
                   CHECK (status IN ('running', 'finished', 'failed', 'stopped', 'interrupted')),
  started_at       TEXT NOT NULL,
  ended_at         TEXT,
  resolved_toml    TEXT NOT NULL,
  toml_sha256      TEXT NOT NULL,
  code_version     TEXT NOT NULL,
  host             TEXT NOT NULL,
  pid              INTEGER NOT NULL,
  torch_version    TEXT NOT NULL,
  blas             TEXT NOT NULL,
  seed             INTEGER NOT NULL,
  params_total     INTEGER NOT NULL,
  params_active    INTEGER NOT NULL,
  target_loss      REAL,
  ttt_step         INTEGER,
  ttt_step_seconds REAL,
  ttt_moe_seconds  REAL
);

CREATE TABLE steps (
  run          INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step         INTEGER NOT NULL,
  train_loss   REAL,
  eval_loss    REAL,
  lr           REAL,
  grad_norm    REAL,
  tokens       INTEGER NOT NULL,
  step_seconds REAL,
  moe_seconds  REAL,
  PRIMARY KEY (run, step)
) WITHOUT ROWID;

CREATE TABLE expert_load (
  run    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step   INTEGER NOT NULL,
  layer  INTEGER NOT NULL,
  expert INTEGER NOT NULL,
  pairs  INTEGER NOT NULL,
  PRIMARY KEY (run, step, layer, expert)
) WITHOUT ROWID;

CREATE TABLE events (
  id      INTEGER PRIMARY KEY,
  run     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  time    TEXT NOT NULL,
  level   TEXT NOT NULL,
  message TEXT NOT NULL
);
)sql"},

    // Everyday queries: runs by name or status, a run's events, and two views that `lrmoe
    // query` users (and list_runs) read instead of repeating the aggregation.
    Migration{2, R"sql(
CREATE INDEX runs_by_name ON runs (name);
CREATE INDEX runs_by_status ON runs (status);
CREATE INDEX events_by_run ON events (run, id);

CREATE VIEW run_summary AS
SELECT r.id,
       r.name,
       r.status,
       r.started_at,
       r.ended_at,
       (SELECT count(*) FROM steps s WHERE s.run = r.id) AS steps,
       (SELECT s.train_loss FROM steps s WHERE s.run = r.id
        ORDER BY s.step DESC LIMIT 1) AS final_train_loss,
       (SELECT s.eval_loss FROM steps s WHERE s.run = r.id AND s.eval_loss IS NOT NULL
        ORDER BY s.step DESC LIMIT 1) AS final_eval_loss,
       r.target_loss,
       r.ttt_step,
       r.ttt_step_seconds,
       r.ttt_moe_seconds,
       r.params_total,
       r.params_active
FROM runs r;

CREATE VIEW expert_load_share AS
SELECT run,
       layer,
       expert,
       sum(pairs) AS pairs,
       CAST(sum(pairs) AS REAL)
         / NULLIF(sum(sum(pairs)) OVER (PARTITION BY run, layer), 0) AS share
FROM expert_load
GROUP BY run, layer, expert;
)sql"},

    // The LRMoE pipeline: the plugins a run used, per-step statistics of each MoE layer and
    // memory of each logical rank, and the modeled (cost-model) MoE time beside the measured
    // one. Older rows get NULL modeled times (never recorded), one rank and no policies (the
    // single-process model before the pipeline). The primary keys of the two per-step tables
    // begin with (run, step), so they serve as those tables' (run, step) indexes.
    Migration{3, R"sql(
ALTER TABLE runs ADD COLUMN ranks INTEGER NOT NULL DEFAULT 1;
ALTER TABLE runs ADD COLUMN policies TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN ttt_moe_modeled_seconds REAL;
ALTER TABLE steps ADD COLUMN moe_modeled_seconds REAL;

CREATE TABLE run_plugins (
  run        INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  kind       TEXT NOT NULL CHECK (kind IN ('placement', 'metric', 'selection', 'routing')),
  name       TEXT NOT NULL,
  version    TEXT NOT NULL,
  parameters TEXT NOT NULL,
  path       TEXT NOT NULL,
  sha256     TEXT NOT NULL,
  PRIMARY KEY (run, kind)
) WITHOUT ROWID;

CREATE TABLE moe_layer_steps (
  run                     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step                    INTEGER NOT NULL,
  layer                   INTEGER NOT NULL,
  pairs_routed            INTEGER NOT NULL,
  pairs_dropped           INTEGER NOT NULL,
  pairs_kept              INTEGER NOT NULL,
  replicas                INTEGER NOT NULL,
  forward_load_max        INTEGER NOT NULL,
  forward_load_mean       REAL,
  backward_load_max       INTEGER NOT NULL,
  backward_load_mean      REAL,
  bytes_forward_dispatch  INTEGER NOT NULL,
  bytes_forward_combine   INTEGER NOT NULL,
  bytes_backward_dispatch INTEGER NOT NULL,
  bytes_backward_return   INTEGER NOT NULL,
  bytes_replica_sync      INTEGER NOT NULL,
  forward_seconds         REAL,
  backward_seconds        REAL,
  modeled_seconds         REAL,
  placement_seconds       REAL,
  metric_seconds          REAL,
  selection_seconds       REAL,
  routing_seconds         REAL,
  compaction_seconds      REAL,
  PRIMARY KEY (run, step, layer)
) WITHOUT ROWID;

CREATE TABLE rank_memory (
  run             INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step            INTEGER NOT NULL,
  rank            INTEGER NOT NULL,
  owned           INTEGER NOT NULL,
  replicas        INTEGER NOT NULL,
  gradients       INTEGER NOT NULL,
  optimizer       INTEGER NOT NULL,
  forward_tokens  INTEGER NOT NULL,
  backward_tokens INTEGER NOT NULL,
  dense           INTEGER NOT NULL,
  PRIMARY KEY (run, step, rank)
) WITHOUT ROWID;

DROP VIEW run_summary;
CREATE VIEW run_summary AS
SELECT r.id,
       r.name,
       r.status,
       r.started_at,
       r.ended_at,
       r.ranks,
       r.policies,
       (SELECT count(*) FROM steps s WHERE s.run = r.id) AS steps,
       (SELECT s.train_loss FROM steps s WHERE s.run = r.id
        ORDER BY s.step DESC LIMIT 1) AS final_train_loss,
       (SELECT s.eval_loss FROM steps s WHERE s.run = r.id AND s.eval_loss IS NOT NULL
        ORDER BY s.step DESC LIMIT 1) AS final_eval_loss,
       r.target_loss,
       r.ttt_step,
       r.ttt_step_seconds,
       r.ttt_moe_seconds,
       r.ttt_moe_modeled_seconds,
       r.params_total,
       r.params_active
FROM runs r;

-- Per run and rank, the largest memory of any step: the paper's subtotal (what placement and
-- routing decide: owned and replica experts, forward and backward token buffers) and the total
-- of every category. The two peaks may fall in different steps.
CREATE VIEW memory_peak AS
SELECT run,
       rank,
       max(owned + replicas + forward_tokens + backward_tokens) AS peak_subtotal,
       max(owned + replicas + gradients + optimizer + forward_tokens + backward_tokens + dense)
         AS peak_total
FROM rank_memory
GROUP BY run, rank;

-- Per run and MoE layer, over its steps: pairs, bytes of each all-to-all and of replica sync,
-- seconds, and the mean load imbalance (busiest rank over the mean rank; steps without load
-- are left out).
CREATE VIEW layer_summary AS
SELECT run,
       layer,
       count(*) AS steps,
       sum(pairs_routed) AS pairs_routed,
       sum(pairs_dropped) AS pairs_dropped,
       sum(pairs_kept) AS pairs_kept,
       sum(bytes_forward_dispatch) AS bytes_forward_dispatch,
       sum(bytes_forward_combine) AS bytes_forward_combine,
       sum(bytes_backward_dispatch) AS bytes_backward_dispatch,
       sum(bytes_backward_return) AS bytes_backward_return,
       sum(bytes_replica_sync) AS bytes_replica_sync,
       sum(forward_seconds) AS forward_seconds,
       sum(backward_seconds) AS backward_seconds,
       sum(modeled_seconds) AS modeled_seconds,
       avg(forward_load_max / NULLIF(forward_load_mean, 0)) AS forward_imbalance,
       avg(backward_load_max / NULLIF(backward_load_mean, 0)) AS backward_imbalance
FROM moe_layer_steps
GROUP BY run, layer;
)sql"},
    Migration{4, R"sql(
ALTER TABLE runs ADD COLUMN processes INTEGER NOT NULL DEFAULT 1;
-- Measured across processes: bytes of pair rows each process sent to other processes (summed
-- over processes) and the slowest process's wall time in its all-to-all-v calls. Zero for runs
-- of one process, where no row leaves the process.
ALTER TABLE moe_layer_steps ADD COLUMN measured_exchange_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE moe_layer_steps ADD COLUMN measured_exchange_seconds REAL NOT NULL DEFAULT 0;

-- Per logical rank, layer and step: what the rank computed and the pair-row bytes it sent to and
-- received from other logical ranks over the layer's four all-to-alls (as the plan moves them).
CREATE TABLE rank_layer_steps (
  run            INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step           INTEGER NOT NULL,
  layer          INTEGER NOT NULL,
  rank           INTEGER NOT NULL,
  forward_pairs  INTEGER NOT NULL,
  backward_pairs INTEGER NOT NULL,
  bytes_sent     INTEGER NOT NULL,
  bytes_received INTEGER NOT NULL,
  PRIMARY KEY (run, step, layer, rank)
) WITHOUT ROWID;

-- Per process, layer and step of a multi-process run, measured: bytes its all-to-all-v calls
-- sent to and received from other processes, their wall time and number, and the layer's
-- forward and backward wall time in that process.
CREATE TABLE process_layer_steps (
  run              INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step             INTEGER NOT NULL,
  layer            INTEGER NOT NULL,
  process          INTEGER NOT NULL,
  bytes_sent       INTEGER NOT NULL,
  bytes_received   INTEGER NOT NULL,
  exchange_seconds REAL NOT NULL,
  exchange_calls   INTEGER NOT NULL,
  forward_seconds  REAL NOT NULL,
  backward_seconds REAL NOT NULL,
  PRIMARY KEY (run, step, layer, process)
) WITHOUT ROWID;

-- Per run, layer and process: the measured all-to-all-v traffic and its bus bandwidth.
CREATE VIEW exchange_summary AS
SELECT run,
       layer,
       process,
       count(*) AS steps,
       sum(bytes_sent) AS bytes_sent,
       sum(bytes_received) AS bytes_received,
       sum(exchange_calls) AS exchange_calls,
       sum(exchange_seconds) AS exchange_seconds,
       sum(bytes_sent) / NULLIF(sum(exchange_seconds), 0) AS send_bytes_per_second
FROM process_layer_steps
GROUP BY run, layer, process;
)sql"},
    // What the paper measures (docs/notes.md): the critical path of the MoE layers beside the
    // wall time and the sum over ranks; the modeled time by part under a named hardware profile
    // (the resolved profile is kept with the run); memory as the peak of each rank's timeline,
    // with the moment it occurs. Older rows keep NULL in the new columns: never recorded.
    Migration{5, R"sql(
ALTER TABLE runs ADD COLUMN hardware_profile TEXT;
ALTER TABLE runs ADD COLUMN memory_per_rank INTEGER;
ALTER TABLE runs ADD COLUMN ttt_moe_critical_seconds REAL;
ALTER TABLE steps ADD COLUMN moe_critical_seconds REAL;
ALTER TABLE moe_layer_steps ADD COLUMN critical_path_seconds REAL;
ALTER TABLE moe_layer_steps ADD COLUMN rank_sum_seconds REAL;
ALTER TABLE moe_layer_steps ADD COLUMN modeled_compute_seconds REAL;
ALTER TABLE moe_layer_steps ADD COLUMN modeled_all_to_all_seconds REAL;
ALTER TABLE moe_layer_steps ADD COLUMN modeled_gather_seconds REAL;
ALTER TABLE moe_layer_steps ADD COLUMN modeled_replica_seconds REAL;
-- Each logical rank's time on the critical path (Note [Critical path]), per phase.
ALTER TABLE rank_layer_steps ADD COLUMN forward_seconds REAL;
ALTER TABLE rank_layer_steps ADD COLUMN backward_seconds REAL;
-- The categories are those at the moment of the largest total; the largest subtotal may fall
-- at another moment. measured_peak: the CUDA caching allocator's peak, NULL on CPU.
ALTER TABLE rank_memory ADD COLUMN peak_phase TEXT;
ALTER TABLE rank_memory ADD COLUMN peak_layer INTEGER;
ALTER TABLE rank_memory ADD COLUMN peak_subtotal INTEGER;
ALTER TABLE rank_memory ADD COLUMN subtotal_phase TEXT;
ALTER TABLE rank_memory ADD COLUMN subtotal_layer INTEGER;
ALTER TABLE rank_memory ADD COLUMN measured_peak INTEGER;

DROP VIEW run_summary;
CREATE VIEW run_summary AS
SELECT r.id,
       r.name,
       r.status,
       r.started_at,
       r.ended_at,
       r.ranks,
       r.processes,
       r.policies,
       (SELECT count(*) FROM steps s WHERE s.run = r.id) AS steps,
       (SELECT s.train_loss FROM steps s WHERE s.run = r.id
        ORDER BY s.step DESC LIMIT 1) AS final_train_loss,
       (SELECT s.eval_loss FROM steps s WHERE s.run = r.id AND s.eval_loss IS NOT NULL
        ORDER BY s.step DESC LIMIT 1) AS final_eval_loss,
       r.target_loss,
       r.ttt_step,
       r.ttt_step_seconds,
       r.ttt_moe_seconds,
       r.ttt_moe_critical_seconds,
       r.ttt_moe_modeled_seconds,
       r.memory_per_rank,
       r.params_total,
       r.params_active
FROM runs r;

-- Per run and rank, the largest memory of any step: the paper's subtotal (owned and replica
-- experts, forward and backward token buffers) and the total, each the peak of the rank's
-- timeline (older rows: the sum of the categories). The two peaks may fall in different steps.
DROP VIEW memory_peak;
CREATE VIEW memory_peak AS
SELECT run,
       rank,
       max(coalesce(peak_subtotal, owned + replicas + forward_tokens + backward_tokens)) AS peak_subtotal,
       max(owned + replicas + gradients + optimizer + forward_tokens + backward_tokens + dense)
         AS peak_total
FROM rank_memory
GROUP BY run, rank;

-- Per run and MoE layer: as in migration 3, with the critical path, the sum over ranks and
-- the modeled time by part.
DROP VIEW layer_summary;
CREATE VIEW layer_summary AS
SELECT run,
       layer,
       count(*) AS steps,
       sum(pairs_routed) AS pairs_routed,
       sum(pairs_dropped) AS pairs_dropped,
       sum(pairs_kept) AS pairs_kept,
       sum(bytes_forward_dispatch) AS bytes_forward_dispatch,
       sum(bytes_forward_combine) AS bytes_forward_combine,
       sum(bytes_backward_dispatch) AS bytes_backward_dispatch,
       sum(bytes_backward_return) AS bytes_backward_return,
       sum(bytes_replica_sync) AS bytes_replica_sync,
       sum(forward_seconds) AS forward_seconds,
       sum(backward_seconds) AS backward_seconds,
       sum(critical_path_seconds) AS critical_path_seconds,
       sum(rank_sum_seconds) AS rank_sum_seconds,
       sum(modeled_seconds) AS modeled_seconds,
       sum(modeled_compute_seconds) AS modeled_compute_seconds,
       sum(modeled_all_to_all_seconds) AS modeled_all_to_all_seconds,
       sum(modeled_gather_seconds) AS modeled_gather_seconds,
       sum(modeled_replica_seconds) AS modeled_replica_seconds,
       avg(forward_load_max / NULLIF(forward_load_mean, 0)) AS forward_imbalance,
       avg(backward_load_max / NULLIF(backward_load_mean, 0)) AS backward_imbalance
FROM moe_layer_steps
GROUP BY run, layer;
)sql"},
    // The device allocator's measured peaks by phase beside the step's (Note [Device timing]),
    // and the measured peak beside the modeled ones per run and rank. NULL on the CPU.
    Migration{6, R"sql(
ALTER TABLE rank_memory ADD COLUMN measured_forward_peak INTEGER;
ALTER TABLE rank_memory ADD COLUMN measured_backward_peak INTEGER;

DROP VIEW memory_peak;
CREATE VIEW memory_peak AS
SELECT run,
       rank,
       max(coalesce(peak_subtotal, owned + replicas + forward_tokens + backward_tokens)) AS peak_subtotal,
       max(owned + replicas + gradients + optimizer + forward_tokens + backward_tokens + dense)
         AS peak_total,
       max(measured_peak) AS measured_peak
FROM rank_memory
GROUP BY run, rank;
)sql"},
    // Sweeps (lrmoe sweep): each cell's settings, and the runs of each cell in order (a cell
    // restarted after an interruption has several; its result is its last).
    Migration{7, R"sql(
CREATE TABLE sweeps (
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL UNIQUE,
  file       TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE TABLE sweep_cells (
  sweep             INTEGER NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
  cell              INTEGER NOT NULL,
  settings          TEXT NOT NULL,
  label             TEXT NOT NULL,
  experiment_sha256 TEXT NOT NULL,
  PRIMARY KEY (sweep, cell),
  UNIQUE (sweep, settings)
) WITHOUT ROWID;

CREATE TABLE sweep_cell_values (
  sweep    INTEGER NOT NULL,
  cell     INTEGER NOT NULL,
  key      TEXT NOT NULL,
  value    TEXT NOT NULL,
  position INTEGER NOT NULL,  -- the key's place among the axes' keys
  PRIMARY KEY (sweep, cell, key),
  FOREIGN KEY (sweep, cell) REFERENCES sweep_cells (sweep, cell) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TABLE sweep_runs (
  run   INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
  sweep INTEGER NOT NULL,
  cell  INTEGER NOT NULL,
  FOREIGN KEY (sweep, cell) REFERENCES sweep_cells (sweep, cell) ON DELETE CASCADE
);

CREATE VIEW sweep_results AS
SELECT s.name AS sweep,
       c.cell,
       c.label,
       c.settings,
       last.run,
       r.status,
       last.runs
FROM sweep_cells c
JOIN sweeps s ON s.id = c.sweep
LEFT JOIN (SELECT sweep, cell, max(run) AS run, count(*) AS runs
           FROM sweep_runs GROUP BY sweep, cell) last
  ON last.sweep = c.sweep AND last.cell = c.cell
LEFT JOIN runs r ON r.id = last.run;
)sql"},
    // The placement trace (Note [Placement trace]): per step and MoE layer, every replica, and
    // each expert's owner at the first step and whenever it moves.
    Migration{8, R"sql(
CREATE TABLE placements (
  run    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step   INTEGER NOT NULL,
  layer  INTEGER NOT NULL,
  expert INTEGER NOT NULL,
  rank   INTEGER NOT NULL,
  slot   INTEGER NOT NULL,
  owner  INTEGER NOT NULL CHECK (owner IN (0, 1)),
  PRIMARY KEY (run, layer, step, rank, slot)
) WITHOUT ROWID;

-- Each expert's owner at every step the run recorded: the last owner row at or before it.
CREATE VIEW expert_owners AS
SELECT s.run, s.step, o.layer, o.expert, o.rank, o.slot
FROM steps s
JOIN placements o ON o.run = s.run AND o.owner = 1 AND o.step <= s.step
WHERE o.step = (SELECT max(p.step) FROM placements p
                WHERE p.run = o.run AND p.layer = o.layer AND p.expert = o.expert
                  AND p.owner = 1 AND p.step <= s.step);
)sql"},
    // Replays (Note [Replay]): runs that planned without training. `kind` says which a run is;
    // `load_source` what drove a replay's routing. A replay's losses, learning rate, gradient
    // norm and wall times are NULL: it measures none of them.
    Migration{9, R"sql(
ALTER TABLE runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'train' CHECK (kind IN ('train', 'replay'));
ALTER TABLE runs ADD COLUMN load_source TEXT;
)sql"},
    // The recording process's start ("BOOT_ID/START_TICKS", store/local_process.hpp), so that a
    // later process given the same id is not taken for it; NULL for runs begun before. And the
    // file's application id, which tells an lrmoe database from another program's.
    Migration{10, R"sql(
ALTER TABLE runs ADD COLUMN process_start TEXT;
PRAGMA application_id = 1819438447;
)sql"},
    // What each run trained on (Note [Data provenance]): the data's bytes and SHA-256 (NULL for
    // synthetic data, generated from the seed), and for a prepared corpus the text and the
    // tokenizer its tokens were made with. Runs recorded before have no row.
    Migration{11, R"sql(
CREATE TABLE run_data (
  run              INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
  kind             TEXT NOT NULL CHECK (kind IN ('synthetic', 'text', 'tokens')),
  path             TEXT,
  bytes            INTEGER,
  sha256           TEXT,
  tokens           INTEGER,
  corpus           TEXT,
  corpus_bytes     INTEGER,
  corpus_sha256    TEXT,
  corpus_sources   TEXT,
  tokenizer        TEXT,
  tokenizer_vocab  INTEGER,
  tokenizer_sha256 TEXT
);
)sql"},
    // What each layer step's placement planned from (Note [SYMI as published]): this pass's
    // counts, earlier passes' only, a history-based placement's first pass (warm-up), or no
    // counts at all; NULL for steps recorded before.
    Migration{12, R"sql(
ALTER TABLE moe_layer_steps ADD COLUMN placement_information TEXT
  CHECK (placement_information IN ('this pass', 'earlier passes', 'warm-up', 'no counts'));
)sql"},
    // Training runs' MoE time to target projected at full size (Note [Projection at full size]):
    // one row per run, model, ranks, tokens per rank and hardware profile; the per-step
    // seconds are the mean over the run's sampled steps.
    Migration{13, R"sql(
CREATE TABLE run_projections (
  run                INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  model              TEXT NOT NULL,
  ranks              INTEGER NOT NULL,
  tokens_per_rank    INTEGER NOT NULL,
  profile            TEXT NOT NULL,
  memory_per_rank    TEXT NOT NULL,
  sampled_steps      TEXT NOT NULL,
  steps              INTEGER NOT NULL,
  reached            INTEGER NOT NULL CHECK (reached IN (0, 1)),
  compute_seconds    REAL NOT NULL,
  all_to_all_seconds REAL NOT NULL,
  gather_seconds     REAL NOT NULL,
  transfer_seconds   REAL NOT NULL,
  projected_seconds  REAL NOT NULL,
  failed             TEXT,
  PRIMARY KEY (run, model, ranks, tokens_per_rank, profile)
);
)sql"},
    // Sharded expert state (cluster.expert_state = "sharded"): the expert weights each process
    // fetched and the gradients it returned, measured per process and summed per layer step
    // beside the cost model's bytes_replica_sync; zero for runs before and replicated ones.
    Migration{14, R"sql(
ALTER TABLE process_layer_steps ADD COLUMN parameter_bytes_sent INTEGER NOT NULL DEFAULT 0;
ALTER TABLE process_layer_steps ADD COLUMN parameter_bytes_received INTEGER NOT NULL DEFAULT 0;
ALTER TABLE process_layer_steps ADD COLUMN parameter_seconds REAL NOT NULL DEFAULT 0;
ALTER TABLE process_layer_steps ADD COLUMN parameter_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE moe_layer_steps ADD COLUMN measured_parameter_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE moe_layer_steps ADD COLUMN measured_parameter_seconds REAL NOT NULL DEFAULT 0;
)sql"},
    // What each process of a run holds of the model (cluster.expert_state): parameters, bytes of
    // fp32 parameters with their gradients, and of AdamW's moments.
    Migration{15, R"sql(
CREATE TABLE process_state (
  run               INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  process           INTEGER NOT NULL,
  dense_parameters  INTEGER NOT NULL,
  expert_parameters INTEGER NOT NULL,
  dense_bytes       INTEGER NOT NULL,
  expert_bytes      INTEGER NOT NULL,
  optimizer_bytes   INTEGER NOT NULL,
  PRIMARY KEY (run, process)
);
)sql"},
    // Of each process's expert-transfer seconds, those it was blocked in them (Note [Overlapped
    // expert fetch]); zero for runs before.
    Migration{16, R"sql(
ALTER TABLE process_layer_steps ADD COLUMN parameter_blocked_seconds REAL NOT NULL DEFAULT 0;
)sql"},
    // Sweeps across models: each cell's model and variant labels (from the sweep file's axis
    // kinds and labels; '' for cells recorded before), and each run's model by name: its sweep
    // cell's model label, else its preset. Runs recorded before get their preset, read from
    // their resolved experiment as lrmoe writes it ("[model]" then "preset = ...").
    Migration{17, R"sql(
ALTER TABLE sweep_cells ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE sweep_cells ADD COLUMN variant TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN model TEXT;

UPDATE runs
SET model = (SELECT CASE WHEN at > 0 THEN substr(rest, 1, instr(rest, '"') - 1) END
             FROM (SELECT instr(resolved_toml, '[model]' || char(10) || 'preset = "') AS at,
                          substr(resolved_toml,
                                 instr(resolved_toml, '[model]' || char(10) || 'preset = "') + 18)
                            AS rest));

DROP VIEW run_summary;
CREATE VIEW run_summary AS
SELECT r.id,
       r.name,
       r.model,
       sw.name AS sweep,
       sr.cell,
       r.status,
       r.started_at,
       r.ended_at,
       r.ranks,
       r.processes,
       r.policies,
       (SELECT count(*) FROM steps s WHERE s.run = r.id) AS steps,
       (SELECT s.train_loss FROM steps s WHERE s.run = r.id
        ORDER BY s.step DESC LIMIT 1) AS final_train_loss,
       (SELECT s.eval_loss FROM steps s WHERE s.run = r.id AND s.eval_loss IS NOT NULL
        ORDER BY s.step DESC LIMIT 1) AS final_eval_loss,
       r.target_loss,
       r.ttt_step,
       r.ttt_step_seconds,
       r.ttt_moe_seconds,
       r.ttt_moe_critical_seconds,
       r.ttt_moe_modeled_seconds,
       r.memory_per_rank,
       r.params_total,
       r.params_active
FROM runs r
LEFT JOIN sweep_runs sr ON sr.run = r.id
LEFT JOIN sweeps sw ON sw.id = sr.sweep;

DROP VIEW sweep_results;
CREATE VIEW sweep_results AS
SELECT s.name AS sweep,
       c.cell,
       c.model,
       c.variant,
       c.label,
       c.settings,
       last.run,
       r.status,
       last.runs
FROM sweep_cells c
JOIN sweeps s ON s.id = c.sweep
LEFT JOIN (SELECT sweep, cell, max(run) AS run, count(*) AS runs
           FROM sweep_runs GROUP BY sweep, cell) last
  ON last.sweep = c.sweep AND last.cell = c.cell
LEFT JOIN runs r ON r.id = last.run;
)sql"},
    // Sweeps that train what they record: each sweep's kind (a training sweep, or the variants
    // of a replay recorded as one), and the identity of the experiment each of a cell's runs
    // trained ('' for runs before), which must be the cell's.
    Migration{18, R"sql(
ALTER TABLE sweeps ADD COLUMN kind TEXT NOT NULL DEFAULT 'train';
ALTER TABLE sweep_runs ADD COLUMN experiment_sha256 TEXT NOT NULL DEFAULT '';
)sql"},
    // Of each layer step's bytes (the four all-to-alls and the replica traffic), those between
    // ranks on different nodes of the hardware profile (Note [Cost model]), and of its modeled
    // seconds of all-to-all, those that ran while chunks computed (Note [Chunked exchange]):
    // modeled_seconds is its parts less these. NULL for steps recorded before.
    Migration{19, R"sql(
ALTER TABLE moe_layer_steps ADD COLUMN bytes_cross_node INTEGER;
ALTER TABLE moe_layer_steps ADD COLUMN modeled_overlapped_seconds REAL;
)sql"},
    // The timelines of the steps train.trace_every names (Note [Step trace]): every process's
    // spans, each from the process's own start of the step; `lrmoe trace` draws them.
    Migration{20, R"sql(
CREATE TABLE trace_spans (
  run           INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step          INTEGER NOT NULL,
  process       INTEGER NOT NULL,
  rank          INTEGER,
  layer         INTEGER,
  phase         TEXT NOT NULL CHECK (phase IN ('forward', 'backward', 'step')),
  kind          TEXT NOT NULL
                CHECK (kind IN ('step', 'layer', 'plan', 'expert', 'all-to-all', 'transfer')),
  start_seconds REAL NOT NULL,
  seconds       REAL NOT NULL
);
CREATE INDEX trace_spans_by_step ON trace_spans (run, step);
)sql"},
    // Of each layer step's modeled_overlapped_seconds, those of parameter transfers: a fetch
    // placed a layer ahead and a gradient return deferred behind the layer below (Note
    // [Overlapped expert fetch]); the rest is all-to-all behind chunks. NULL for steps recorded
    // before, whose overlap was all all-to-all.
    Migration{21, R"sql(
ALTER TABLE moe_layer_steps ADD COLUMN modeled_hidden_transfer_seconds REAL;
)sql"},
};

constexpr bool numbered_in_order() {
  for (std::size_t i = 0; i < kMigrations.size(); ++i) {
    if (kMigrations[i].version != static_cast<int>(i) + 1) return false;
  }
  return true;
}
static_assert(numbered_in_order(), "migration N must be the N-th entry of kMigrations");

}  // namespace

const Migration* schema_migrations_begin() {
  return kMigrations.data();
}

const Migration* schema_migrations_end() {
  return kMigrations.data() + kMigrations.size();
}

}  // namespace lrmoe::store
