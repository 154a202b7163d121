#include "store/expert_load_history.hpp"

#include <fmt/format.h>

namespace lrmoe::store {

ExpertLoadHistory read_expert_load_history(const sqlite::Database& db, int64_t run,
                                           int64_t last_steps) {
  sqlite::Statement exists = db.prepare("SELECT count(*) FROM runs WHERE id = ?1");
  exists.bind_int64(1, run);
  exists.step();
  if (exists.column_int64(0) == 0)
    throw db.error_with_message(fmt::format("has no run {}; lrmoe runs lists them", run));
  sqlite::Statement select = db.prepare(
      "SELECT step, layer, expert, pairs FROM expert_load "
      "WHERE run = ?1 AND step IN (SELECT DISTINCT step FROM expert_load WHERE run = ?1 "
      "                            ORDER BY step DESC LIMIT ?2) "
      "ORDER BY step, layer, expert");
  select.bind_int64(1, run).bind_int64(2, last_steps);
  ExpertLoadHistory history;
  int64_t last_layer = -1;
  while (select.step()) {
    const int64_t step = select.column_int64(0), layer = select.column_int64(1),
                  expert = select.column_int64(2), pairs = select.column_int64(3);
    const bool new_step = history.steps.empty() || history.steps.back() != step;
    if (new_step) {
      history.steps.push_back(step);
      history.pairs.emplace_back();
    }
    if (new_step || layer != last_layer) {
      history.pairs.back().emplace_back();
      if (history.steps.size() == 1) history.layers.push_back(layer);
      last_layer = layer;
    }
    std::vector<int64_t>& experts = history.pairs.back().back();
    if (static_cast<int64_t>(experts.size()) <= expert)
      experts.resize(static_cast<std::size_t>(expert) + 1, 0);
    experts[static_cast<std::size_t>(expert)] = pairs;
  }
  if (history.steps.empty())
    throw db.error_with_message(fmt::format(
        "run {} recorded no per-expert loads (table expert_load): it trained without MoE layers "
        "or recorded no step",
        run));
  return history;
}

}  // namespace lrmoe::store
