-- One row per run: steps to target, MoE time to target (critical path, wall, modeled under the
-- run's hardware profile), the modeled share of all-to-all in MoE time, pairs dropped in forward
-- and kept in backward, the busiest rank's peak memory subtotal by liveness and its reduction
-- against fixed ownership with memory to spare on the same model (the run named MODEL-fixed-unbound).
WITH per_run AS (
  SELECT r.id, r.name, r.policies, r.status, r.memory_per_rank, r.ttt_step,
         r.ttt_moe_critical_seconds, r.ttt_moe_seconds, r.ttt_moe_modeled_seconds,
         (SELECT sum(m.modeled_all_to_all_seconds) / sum(m.modeled_seconds) FROM moe_layer_steps m
          WHERE m.run = r.id) AS all_to_all_share,
         (SELECT sum(m.pairs_dropped) * 1.0 / sum(m.pairs_routed) FROM moe_layer_steps m WHERE m.run = r.id) AS dropped,
         (SELECT sum(m.pairs_kept) * 1.0 / sum(m.pairs_routed) FROM moe_layer_steps m WHERE m.run = r.id) AS kept,
         (SELECT max(p.peak_subtotal) FROM memory_peak p WHERE p.run = r.id) AS peak_subtotal,
         replace(replace(r.name, '-bound', ''), '-symi-paper', '') AS model
  FROM runs r)
SELECT a.id, a.name, a.policies, a.status, a.ttt_step AS target_step,
       round(a.ttt_moe_critical_seconds, 2) AS critical_s, round(a.ttt_moe_seconds, 2) AS wall_s,
       round(a.ttt_moe_modeled_seconds * 1000, 3) AS modeled_ms, round(a.all_to_all_share, 3) AS a2a_share,
       round(a.dropped, 3) AS dropped, round(a.kept, 3) AS kept,
       round(a.peak_subtotal / 1048576.0, 2) AS subtotal_mib,
       round(1 - a.peak_subtotal * 1.0 / f.peak_subtotal, 3) AS subtotal_vs_fixed
FROM per_run a
LEFT JOIN per_run f ON f.name = replace(a.model, '-fixed-unbound', '') || '-fixed-unbound'
ORDER BY a.id
