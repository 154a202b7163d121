#include "runner/replay_outcome.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/pipeline/memory_timeline.hpp"
#include "runner/text_table.hpp"

namespace lrmoe {
namespace {

// The unit of a table's memory columns: GiB, or MiB when every figure is below a GiB.
struct MemoryUnit {
  const char* name;
  double bytes;
};

// Keeps the busiest rank's busiest pass of `report` when its total beats the steps before: the
// step's peaks (StepReport::rank_memory) name the rank, and only its passes are looked at again.
void keep_busiest_pass(ReplayOutcome& o, const StepReport& report) {
  const std::vector<MemoryPeak>& peaks = report.rank_memory;
  const auto busiest = std::max_element(
      peaks.begin(), peaks.end(),
      [](const auto& a, const auto& b) { return a.at_peak.total() < b.at_peak.total(); });
  if (busiest == peaks.end() || busiest->at_peak.total() <= o.busiest_total) return;
  const auto rank = static_cast<std::size_t>(busiest - peaks.begin());
  std::vector<bool> placed_ahead;
  for (const LayerStepStatistics& layer : report.layers) placed_ahead.push_back(layer.placed_ahead);
  for (std::size_t pass = 0; pass < report.layers.front().passes.size(); ++pass) {
    std::vector<LayerHolding> holdings;
    for (const LayerStepStatistics& layer : report.layers)
      holdings.push_back(layer.passes[pass][rank]);
    if (pass_peak(o.costs, holdings, o.fixed, placed_ahead).at_peak.total() ==
        busiest->at_peak.total()) {
      o.busiest_total = busiest->at_peak.total();
      o.busiest_rank = static_cast<int64_t>(rank);
      o.busiest_pass = std::move(holdings);
      return;
    }
  }
}

MemoryUnit memory_unit(const std::vector<ReplayOutcome>& outcomes) {
  int64_t largest = 0;
  for (const ReplayOutcome& o : outcomes)
    for (int64_t total : o.total) largest = std::max(largest, total);
  if (largest >= int64_t{1} << 30) return {"GiB", 1024.0 * 1024.0 * 1024.0};
  return {"MiB", 1024.0 * 1024.0};
}

std::string in_unit(int64_t bytes, const MemoryUnit& unit) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / unit.bytes);
}

std::string percent(int64_t part, int64_t whole) {
  return whole > 0
             ? fmt::format("{:.1f}", 100.0 * static_cast<double>(part) / static_cast<double>(whole))
             : "-";
}

// The largest of `values` and the rank that has it: "12.31 (r3)".
std::string peak_text(const std::vector<int64_t>& values, const MemoryUnit& unit) {
  if (values.empty()) return "-";
  const auto it = std::max_element(values.begin(), values.end());
  return fmt::format("{} (r{})", in_unit(*it, unit), it - values.begin());
}

// Per variant, the plan's host seconds per step by part beside the modeled MoE time it plans:
// what must keep up with the step (Note [Replay]).
void print_plan_parts(const std::vector<ReplayOutcome>& outcomes, std::ostream& out) {
  QueryResult parts;
  parts.columns = {"variant",       "placement",  "metric",      "selection",
                   "routing",       "compaction", "plan s/step", "modeled MoE s/step",
                   "plan / modeled"};
  for (const ReplayOutcome& o : outcomes) {
    if (o.steady_steps == 0) continue;
    const double steps = static_cast<double>(o.steady_steps);
    const PipelineOverhead& p = o.plan_parts;
    auto per_step = [&](double seconds) {
      return std::optional<std::string>(fmt::format("{:.3f}", seconds / steps));
    };
    // The whole to a tenth of a millisecond, as the modeled time beside it: plans of 10-30 ms,
    // which a millisecond's rounding moved by up to 5% in comparisons of two builds.
    parts.rows.push_back({o.label, per_step(p.placement), per_step(p.metric), per_step(p.selection),
                          per_step(p.routing), per_step(p.compaction),
                          fmt::format("{:.4f}", p.total() / steps),
                          fmt::format("{:.4f}", o.modeled / steps),
                          fmt::format("{:.2f}", o.modeled > 0 ? p.total() / o.modeled : 0.0)});
  }
  if (parts.rows.empty()) return;
  out << "\nplanning on this host, CPU seconds per step of the process that plans longest, on "
         "one core, by part (every MoE layer, forward and backward), against the modeled MoE "
         "time it plans:\n"
      << render_text_table(parts, 24, "-");
}

}  // namespace

void add_replay_step(ReplayOutcome& o, const StepReport& report) {
  ++o.steps;
  keep_busiest_pass(o, report);
  for (const LayerStepStatistics& layer : report.layers) {
    std::vector<int64_t> instances(layer.forward_load.size(), 0);
    for (const ExpertInstance& instance : layer.placement)
      o.most_instances = std::max(o.most_instances, ++instances[instance.rank]);
  }
  for (const MemoryPeak& peak : report.rank_memory)
    o.most_replica_bytes = std::max(o.most_replica_bytes, peak.at_peak.replicas);
  const bool warm_up = std::any_of(
      report.layers.begin(), report.layers.end(),
      [](const LayerStepStatistics& l) { return l.information == PlanInformation::WarmUp; });
  if (warm_up) {
    ++o.warm_up_steps;
    o.warm_up_modeled += report.moe_modeled_seconds;
    for (const LayerStepStatistics& layer : report.layers) {
      o.warm_up_routed += layer.pairs_routed;
      o.warm_up_dropped += layer.pairs_dropped;
    }
  } else {
    ++o.steady_steps;
    o.modeled += report.moe_modeled_seconds;
    for (const LayerStepStatistics& layer : report.layers) {
      o.replicas += static_cast<double>(layer.replicas);
      ++o.layer_steps;
      o.routed += layer.pairs_routed;
      o.dropped += layer.pairs_dropped;
      o.kept += layer.pairs_kept;
      o.planning += layer.overhead.total();
      o.plan_parts += layer.overhead;
      const LayerTraffic& t = layer.traffic;
      o.moved_bytes +=
          static_cast<double>(t.forward_dispatch + t.forward_combine + t.backward_dispatch +
                              t.backward_return + t.replica_sync);
      o.cross_node_bytes += static_cast<double>(t.cross_node);
    }
  }
  for (const LayerStepStatistics& layer : report.layers) {
    for (const std::vector<LayerHolding>& pass : layer.passes) {
      o.layer_subtotal.resize(pass.size(), 0);
      for (std::size_t r = 0; r < pass.size(); ++r) {
        o.layer_subtotal[r] =
            std::max(o.layer_subtotal[r],
                     static_cast<int64_t>(std::llround(layer_subtotal_bytes(o.costs, pass[r]))));
      }
    }
  }
  o.subtotal.resize(report.rank_memory.size(), 0);
  o.total.resize(report.rank_memory.size(), 0);
  for (std::size_t r = 0; r < report.rank_memory.size(); ++r) {
    o.subtotal[r] = std::max(o.subtotal[r], report.rank_memory[r].subtotal);
    o.total[r] = std::max(o.total[r], report.rank_memory[r].at_peak.total());
  }
}

void print_replay_outcomes(const std::vector<ReplayOutcome>& outcomes, std::ostream& out) {
  const MemoryUnit unit = memory_unit(outcomes);
  QueryResult summary;
  summary.columns = {"variant",
                     "policies",
                     fmt::format("budget {}", unit.name),
                     "fits",
                     "slots used/rank",
                     "replicas/layer",
                     fmt::format("replicas at peak {}", unit.name),
                     "dropped fwd %",
                     "kept bwd %",
                     fmt::format("peak subtotal {}", unit.name),
                     fmt::format("layer subtotal {}", unit.name),
                     fmt::format("peak total {}", unit.name),
                     "moved GiB/step",
                     "cross-node %",
                     "modeled MoE s/step",
                     "plan s/step",
                     "run"};
  auto text = [](std::string s) { return std::optional<std::string>(std::move(s)); };
  for (const ReplayOutcome& o : outcomes) {
    const double steps = std::max<int64_t>(o.steady_steps, 1);
    const bool any = o.steady_steps > 0;
    summary.rows.push_back(
        {text(o.label), text(o.policies),
         o.memory_per_rank > 0 ? text(in_unit(o.memory_per_rank, unit)) : std::nullopt,
         text(o.failed ? fmt::format("no (after {} steps)", o.steps) : "yes"),
         text(o.steps ? std::to_string(o.most_instances) : "-"),
         text(o.layer_steps ? fmt::format("{:.1f}", o.replicas / static_cast<double>(o.layer_steps))
                            : "-"),
         text(o.steps ? in_unit(o.most_replica_bytes, unit) : "-"),
         text(percent(o.dropped, o.routed)), text(percent(o.kept, o.routed)),
         text(peak_text(o.subtotal, unit)), text(peak_text(o.layer_subtotal, unit)),
         text(peak_text(o.total, unit)),
         text(any ? fmt::format("{:.2f}", o.moved_bytes / steps / (1024.0 * 1024.0 * 1024.0))
                  : "-"),
         text(any && o.moved_bytes > 0
                  ? fmt::format("{:.1f}", 100.0 * o.cross_node_bytes / o.moved_bytes)
                  : "-"),
         text(any ? fmt::format("{:.4f}", o.modeled / steps) : "-"),
         text(any ? fmt::format("{:.2f}", o.planning / steps) : "-"),
         o.run ? text(std::to_string(*o.run)) : std::nullopt});
  }
  out << render_text_table(summary, 48, "-");
  out << "peak subtotal: owned experts + replicas + token buffers over the step's timeline, all "
         "MoE layers; layer subtotal: the same for one MoE layer on its own, the largest; both "
         "at the rank named; slots used: the most instances one rank hosted in one layer; "
         "replicas at peak: the most replica bytes one rank held at its peak; moved: the "
         "all-to-alls' and replica transfers' bytes, cross-node: the share of them between "
         "nodes of the hardware profile\n";
  for (const ReplayOutcome& o : outcomes) {
    if (o.warm_up_steps == 0) continue;
    out << fmt::format(
        "{}: {} warm-up step(s), a placement with no history yet, left out of the per-step "
        "figures above (they are in the peaks): modeled MoE {:.4f} s/step, dropped fwd {}%\n",
        o.label, o.warm_up_steps, o.warm_up_modeled / static_cast<double>(o.warm_up_steps),
        percent(o.warm_up_dropped, o.warm_up_routed));
  }
  print_plan_parts(outcomes, out);
  for (const ReplayOutcome& o : outcomes)
    if (o.failed) out << fmt::format("\n{} does not fit: {}\n", o.label, *o.failed);
  for (const ReplayOutcome& o : outcomes) {
    if (o.allocated) {
      const AllocatedPeak& a = *o.allocated;
      out << fmt::format(
          "\n{}: --allocate: rank {}'s busiest pass, modeled peak {} {}, the allocator's peak {} "
          "{} ({:+.3f}%) over {} buffers\n",
          o.label, o.busiest_rank, in_unit(a.modeled, unit), unit.name, in_unit(a.allocated, unit),
          unit.name,
          100.0 * static_cast<double>(a.allocated - a.modeled) / static_cast<double>(a.modeled),
          a.buffers);
    } else if (o.allocation_failed) {
      out << fmt::format("\n{}: --allocate: rank {}'s busiest pass could not be allocated: {}\n",
                         o.label, o.busiest_rank, *o.allocation_failed);
    }
  }

  // Per rank, each variant's peak subtotal / total.
  std::size_t ranks = 0;
  for (const ReplayOutcome& o : outcomes) ranks = std::max(ranks, o.subtotal.size());
  if (ranks == 0) return;
  QueryResult per_rank;
  per_rank.columns.push_back("rank");
  for (const ReplayOutcome& o : outcomes)
    per_rank.columns.push_back(fmt::format("{} subtotal / total {}", o.label, unit.name));
  for (std::size_t r = 0; r < ranks; ++r) {
    std::vector<std::optional<std::string>> row{text(std::to_string(r))};
    for (const ReplayOutcome& o : outcomes) {
      row.push_back(r < o.subtotal.size()
                        ? text(fmt::format("{} / {}", in_unit(o.subtotal[r], unit),
                                           in_unit(o.total[r], unit)))
                        : std::nullopt);
    }
    per_rank.rows.push_back(std::move(row));
  }
  out << "\nper-rank peaks over the replayed steps (Note [Memory model]):\n"
      << render_text_table(per_rank, 40, "-");
}

}  // namespace lrmoe
