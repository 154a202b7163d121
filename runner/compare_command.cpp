#include "runner/compare_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

#include "runner/compare_plots.hpp"
#include "runner/differing_keys_text.hpp"
#include "runner/headline_projection.hpp"
#include "runner/json_text.hpp"
#include "runner/named_runs.hpp"
#include "runner/query_result_text.hpp"
#include "runner/seed_statistics.hpp"
#include "runner/significant_digits.hpp"
#include "runner/text_table.hpp"
#include "runner/variant_grouping.hpp"
#include "store/results_store.hpp"

namespace lrmoe {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kMiB = 1 << 20;
const std::vector<std::string> kFormats = {"table", "csv", "json", "markdown"};

// The runs of one variant of one model, figure by figure.
struct VariantRuns {
  std::string model;
  std::string name;
  std::vector<int64_t> run_ids;
  std::vector<uint64_t> seeds;
  int64_t runs = 0;
  int64_t reached = 0;
  std::vector<double> steps, critical, modeled;  // to target; +infinity: not reached
  std::vector<double> steps_run;                 // every step the run trained
  std::vector<double> replicas, forward_imbalance;
  std::vector<double> memory_mib;
  std::vector<double> modeled_per_step;  // MoE seconds per step, mean over each run's steps
  std::vector<double> dropped, kept;     // fractions of the routed pairs
  // MoE seconds to target projected at full size (lrmoe project), at the headline
  // configuration; +infinity: not reached
  std::vector<double> projected;
  // Every projected configuration's records, by "model, R ranks, T tokens/rank, profile"
  std::map<std::string, std::vector<ProjectionRecord>> projections;
};

std::string configuration_of(const ProjectionRecord& p) {
  return fmt::format("{}, {} x {}, {}, {}", p.model, p.ranks, p.tokens_per_rank, p.profile,
                     p.memory_per_rank);
}

// The name a run's model goes by: its sweep cell's model label, else its preset.
std::string model_name(const RunFigures& run, const RunConfiguration& configuration) {
  if (!run.sweep_model.empty()) return run.sweep_model;
  if (!run.model.empty()) return run.model;
  const auto preset = configuration.model.find("model.preset");
  return preset == configuration.model.end() || preset->second.empty() ? "custom" : preset->second;
}

// The name a run's variant goes by: its sweep cell's variant label, else the cell's settings
// without the seed and the model's (cells recorded before labels), else its policies.
std::string variant_name(const RunFigures& run) {
  if (!run.sweep_variant.empty()) return run.sweep_variant;
  if (run.cell_values.empty()) return run.policies;
  std::string name;
  for (const auto& [key, value] : run.cell_values) {
    if (key == "experiment.seed" || key.rfind("model.", 0) == 0) continue;
    name += (name.empty() ? "" : ", ") + key.substr(key.rfind('.') + 1) + "=" + value;
  }
  return name.empty() ? "all" : name;
}

void add_projections(VariantRuns& v, const std::vector<ProjectionRecord>& projections) {
  const ProjectionRecord* headline = nullptr;
  for (const ProjectionRecord& p : projections) {
    v.projections[configuration_of(p)].push_back(p);
    if (is_headline_projection(p)) headline = &p;
  }
  // A run that did not reach its target, or whose plans do not fit at full size, never gets
  // there: infinity, as in the other figures to target.
  if (headline)
    v.projected.push_back(headline->reached && !headline->failed ? headline->projected_seconds
                                                                 : kInfinity);
}

void add_run(VariantRuns& v, const RunFigures& run) {
  v.run_ids.push_back(run.run);
  v.seeds.push_back(run.seed);
  ++v.runs;
  v.steps_run.push_back(static_cast<double>(run.steps));
  if (run.replicas) v.replicas.push_back(*run.replicas);
  if (run.forward_imbalance) v.forward_imbalance.push_back(*run.forward_imbalance);
  if (run.target_loss) {
    const std::optional<TimeToTarget>& t = run.time_to_target;
    if (t) ++v.reached;
    v.steps.push_back(t ? static_cast<double>(t->step) : kInfinity);
    v.critical.push_back(t ? t->moe_critical_seconds : kInfinity);
    v.modeled.push_back(t ? t->moe_modeled_seconds : kInfinity);
  }
  if (run.modeled_seconds_per_step) v.modeled_per_step.push_back(*run.modeled_seconds_per_step);
  if (run.peak_subtotal) v.memory_mib.push_back(static_cast<double>(*run.peak_subtotal) / kMiB);
  if (run.pairs_routed > 0) {
    const auto routed = static_cast<double>(run.pairs_routed);
    v.dropped.push_back(static_cast<double>(run.pairs_dropped) / routed);
    v.kept.push_back(static_cast<double>(run.pairs_kept) / routed);
  }
}

// The figures a row can show, by name, with how each prints.
struct Figure {
  const char* name;   // in CSV and JSON, and for --columns
  const char* title;  // in the table and Markdown
  std::vector<double> VariantRuns::*values;
  int decimals;  // in CSV and JSON (two more); the table and Markdown print 3 significant digits
  double scale;  // 100 for fractions shown as percentages
  bool reduced;  // compared against the baseline
  bool shown;    // without --columns
};
const std::vector<Figure> kFigures = {
    {"steps_to_target", "steps to target", &VariantRuns::steps, 0, 1, true, true},
    {"moe_critical_seconds_to_target", "MoE critical s", &VariantRuns::critical, 3, 1, true, true},
    {"moe_modeled_seconds_to_target", "modeled s", &VariantRuns::modeled, 4, 1, true, true},
    {"moe_modeled_seconds_per_step", "modeled s/step", &VariantRuns::modeled_per_step, 4, 1, true,
     true},
    {"projected_moe_seconds_to_target", "projected s", &VariantRuns::projected, 1, 1, true, true},
    {"peak_subtotal_mib", "peak subtotal MiB", &VariantRuns::memory_mib, 1, 1, true, true},
    {"dropped_forward_percent", "dropped fwd %", &VariantRuns::dropped, 1, 100, false, true},
    {"kept_backward_percent", "kept bwd %", &VariantRuns::kept, 1, 100, false, true},
    {"steps", "steps run", &VariantRuns::steps_run, 0, 1, false, false},
    {"replicas", "replicas per layer", &VariantRuns::replicas, 2, 1, false, false},
    {"forward_imbalance", "fwd imbalance", &VariantRuns::forward_imbalance, 3, 1, false, false},
};
constexpr int kSignificant = 3;

// The figures --columns names, in its order; without it, those shown by default.
std::vector<const Figure*> chosen_figures(const std::vector<std::string>& columns) {
  std::vector<const Figure*> chosen;
  if (columns.empty()) {
    for (const Figure& f : kFigures)
      if (f.shown) chosen.push_back(&f);
    return chosen;
  }
  std::vector<std::string> names;
  for (const Figure& f : kFigures) names.push_back(f.name);
  for (const std::string& column : columns) {
    const auto f = std::find(names.begin(), names.end(), column);
    if (f == names.end())
      throw std::invalid_argument(fmt::format("--columns {}: no such figure; the figures: {}",
                                              column, fmt::join(names, ", ")));
    chosen.push_back(&kFigures[static_cast<std::size_t>(f - names.begin())]);
  }
  return chosen;
}

std::string number(double value, int decimals) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (std::isnan(value)) return "nan";
  return fmt::format("{:.{}f}", value, decimals);
}

std::string spread_text(const std::vector<double>& values, const Figure& f) {
  if (values.empty()) return "-";
  const SeedSpread s = seed_spread(values);
  auto show = [&](double v) { return significant_text(v * f.scale, kSignificant); };
  if (values.size() == 1) return show(s.median);
  return fmt::format("{} [{}–{}]", show(s.median), show(s.low), show(s.high));
}

int64_t distinct_seeds(const VariantRuns& v) {
  return static_cast<int64_t>(std::set<uint64_t>(v.seeds.begin(), v.seeds.end()).size());
}

// A bootstrap interval needs a few seeds on each side to mean anything.
constexpr int64_t kFewSeeds = 3;

// "3", or "4 (seeds repeat)" when two runs of the variant share a seed.
std::string runs_text(const VariantRuns& v) {
  return distinct_seeds(v) < v.runs ? fmt::format("{} (seeds repeat)", v.runs)
                                    : std::to_string(v.runs);
}

std::string reduction_text(const std::optional<Reduction>& r) {
  if (!r) return "-";
  auto pct = [](double v) {
    return std::isinf(v) ? std::string(v > 0 ? "+∞" : "-∞") : fmt::format("{:+.0f}%", 100 * v);
  };
  return fmt::format("{} [{}, {}]", pct(r->estimate), pct(r->low), pct(r->high));
}

// JSON has no infinity: a reduction against a baseline that never got there is null.
std::string json_fraction(double value) {
  return std::isfinite(value) ? number(value, 4) : "null";
}

std::string json_number(double value, const Figure& f) {
  return std::isfinite(value) ? number(value * f.scale, f.decimals + 2) : "null";
}

// Numbers only, one column each: median, min and max per figure (inf: a seed that did not reach
// the target), then each reduction and its interval.
template <typename ReductionOf>
void write_csv(const std::vector<VariantRuns>& variants, bool with_baseline,
               const ReductionOf& reduction_of, std::ostream& out) {
  out << "model,variant,runs,reached";
  for (const Figure& f : kFigures) out << fmt::format(",{0}_median,{0}_min,{0}_max", f.name);
  if (with_baseline) {
    for (const Figure& f : kFigures)
      if (f.reduced)
        out << fmt::format(",reduction_{0},reduction_{0}_low,reduction_{0}_high", f.name);
  }
  out << "\n";
  for (const VariantRuns& v : variants) {
    out << csv_field(v.model) << "," << csv_field(v.name) << "," << v.runs << "," << v.reached;
    for (const Figure& f : kFigures) {
      const std::vector<double>& values = v.*f.values;
      if (values.empty()) {
        out << ",,,";
        continue;
      }
      const SeedSpread s = seed_spread(values);
      out << "," << number(s.median * f.scale, f.decimals + 2) << ","
          << number(s.low * f.scale, f.decimals + 2) << ","
          << number(s.high * f.scale, f.decimals + 2);
    }
    if (with_baseline) {
      for (const Figure& f : kFigures) {
        if (!f.reduced) continue;
        const std::optional<Reduction> r = reduction_of(v, f);
        out << (r ? fmt::format(",{},{},{}", number(r->estimate, 4), number(r->low, 4),
                                number(r->high, 4))
                  : std::string(",,,"));
      }
    }
    out << "\n";
  }
}

// Every projected configuration of every variant: projected seconds over seeds, the shares of
// its parts (medians over seeds) and the reduction against the baseline at that configuration.
void write_projection_table(const std::vector<VariantRuns>& variants,
                            const std::map<std::string, const VariantRuns*>& baselines,
                            std::ostream& out) {
  auto seconds_of = [](const std::vector<ProjectionRecord>& records) {
    std::vector<double> seconds;
    for (const ProjectionRecord& p : records)
      seconds.push_back(p.reached && !p.failed ? p.projected_seconds : kInfinity);
    return seconds;
  };
  QueryResult table;
  table.columns = {
      "model",      "variant",     "full size: model, ranks x tokens/rank, profile, budget",
      "runs",       "projected s", "compute",
      "all-to-all", "plan coll.",  "transfers",
      "reduction"};
  const Figure seconds{"", "", nullptr, 1, 1, true, true};
  for (const VariantRuns& v : variants) {
    for (const auto& [configuration, records] : v.projections) {
      std::vector<double> parts[4];
      int64_t failed = 0;
      for (const ProjectionRecord& p : records) {
        if (p.failed) {
          ++failed;
          continue;
        }
        const double total =
            p.compute_seconds + p.all_to_all_seconds + p.gather_seconds + p.transfer_seconds;
        const double values[4] = {p.compute_seconds, p.all_to_all_seconds, p.gather_seconds,
                                  p.transfer_seconds};
        for (int i = 0; i < 4; ++i) parts[i].push_back(total > 0 ? values[i] / total : 0);
      }
      std::optional<Reduction> reduction;
      const auto base = baselines.find(v.model);
      if (base != baselines.end() && base->second != &v) {
        const auto other = base->second->projections.find(configuration);
        if (other != base->second->projections.end())
          reduction = bootstrap_reduction(seconds_of(records), seconds_of(other->second));
      }
      std::vector<std::optional<std::string>> row{
          v.model, v.name, configuration,
          fmt::format("{}{}", records.size(),
                      failed ? fmt::format(" ({} do not fit)", failed) : std::string()),
          spread_text(seconds_of(records), seconds)};
      for (const auto& part : parts)
        row.push_back(part.empty() ? "-" : fmt::format("{:.0f}%", 100 * seed_spread(part).median));
      row.push_back(reduction_text(reduction));
      table.rows.push_back(std::move(row));
    }
  }
  if (table.rows.empty()) return;
  out << "\nMoE time to target projected at full size (lrmoe project; Note [Projection at full "
         "size]):\n"
      << render_text_table(table, std::string::npos)
      << "projected s: median [min–max] over seeds; ∞: a seed that missed its target or whose "
         "plans do not fit at full size; the parts' shares are medians over the seeds that fit\n";
}

}  // namespace

int compare_command(const CompareOptions& options, std::ostream& out, std::ostream& notes) {
  if (std::find(kFormats.begin(), kFormats.end(), options.format) == kFormats.end())
    throw std::invalid_argument("--format " + options.format +
                                ": use table, csv, json or markdown");
  const PlotAxis plot_x = plot_axis_named(options.plot_x);
  const auto store = ResultsStore::open_read_only(options.database);
  const std::vector<int64_t> runs = named_runs(*store, options.runs, options.sweeps, "compare");

  std::map<int64_t, std::vector<ProjectionRecord>> projections;
  for (ProjectionRecord& p : store->projections(runs)) projections[p.run].push_back(std::move(p));
  // A run still running, stopped or interrupted has not had its chance at the target: counted
  // as a miss it would read as one. It is left out and named. A failed run (a plan that does not
  // fit, say) is a result: it never reaches the target.
  std::vector<std::string> unfinished;
  std::vector<RunFigures> compared;
  for (RunFigures& run : store->run_figures(runs)) {
    if (run.status != "finished" && run.status != "failed") {
      unfinished.push_back(fmt::format("{} ({})", run.run, run.status));
      continue;
    }
    compared.push_back(std::move(run));
  }
  std::vector<GroupedRun> grouped;
  for (const RunFigures& run : compared) {
    RunConfiguration configuration = run_configuration(run);
    grouped.push_back(
        {model_name(run, configuration), variant_name(run), std::move(configuration)});
  }
  const Grouping grouping = group_by_configuration(grouped);
  std::vector<VariantRuns> variants;
  for (const VariantGroup& group : grouping.groups) {
    VariantRuns& v = variants.emplace_back();
    v.model = group.model;
    v.name = group.variant;
    for (const std::size_t r : group.runs) {
      add_run(v, compared[r]);
      add_projections(v, projections[compared[r].run]);
    }
  }
  const std::vector<const Figure*> shown = chosen_figures(options.columns);
  // Each model's baseline.
  std::map<std::string, const VariantRuns*> baselines;
  if (options.baseline) {
    std::string names;
    for (const VariantRuns& v : variants) {
      if (v.name == *options.baseline) baselines[v.model] = &v;
      names += (names.empty() ? "'" : ", '") + v.name + "'";
    }
    // Runs given by id are named by their policies ("symi/gate/keep_all/round_robin"): their
    // placement alone ("symi") names the one such variant of a model.
    if (baselines.empty()) {
      std::map<std::string, int> matches;
      for (const VariantRuns& v : variants) {
        if (v.name.rfind(*options.baseline + "/", 0) != 0) continue;
        baselines[v.model] = &v;
        ++matches[v.model];
      }
      for (const auto& [model, count] : matches) {
        if (count > 1)
          throw std::invalid_argument(fmt::format(
              "--baseline {}: {} variants of {} have that placement; name one of them in full: {}",
              *options.baseline, count, model, names));
      }
    }
    if (baselines.empty())
      throw std::invalid_argument("--baseline " + *options.baseline +
                                  ": no variant of that name; the variants: " + names);
  }
  auto reduction_of = [&](const VariantRuns& v, const Figure& f) -> std::optional<Reduction> {
    const auto base = baselines.find(v.model);
    if (base == baselines.end() || base->second == &v) return std::nullopt;
    return bootstrap_reduction(v.*f.values, (*base->second).*f.values);
  };

  if (options.plot_dir) {
    // The figures show compare's own reductions, of the time to target along their x axis.
    const auto along = std::find_if(kFigures.begin(), kFigures.end(), [&](const Figure& f) {
      return f.name == time_to_target_figure(plot_x);
    });
    if (along == kFigures.end()) throw std::logic_error("compare --plot: no figure along --x");
    std::vector<PlotVariant> plotted;
    for (const VariantRuns& v : variants)
      plotted.push_back({v.model, v.name, v.run_ids, v.reached, reduction_of(v, *along)});
    write_comparison_plots({options.database, options.sweeps, plot_x, options.baseline}, plotted,
                           projections, *options.plot_dir, notes);
  }

  const std::string left_out = unfinished.empty() ? std::string()
                                                  : fmt::format("left out, not finished: run {}\n",
                                                                fmt::join(unfinished, ", run "));
  if (options.format == "json" || options.format == "csv") notes << left_out;

  if (options.format == "json") {
    out << "[\n";
    for (std::size_t i = 0; i < variants.size(); ++i) {
      const VariantRuns& v = variants[i];
      out << fmt::format(
          "  {{\"model\": {}, \"variant\": {}, \"runs\": {}, \"reached_target\": {}, "
          "\"run_ids\": [{}], \"seeds\": [{}]",
          json_string(v.model), json_string(v.name), v.runs, v.reached, fmt::join(v.run_ids, ", "),
          fmt::join(v.seeds, ", "));
      for (const Figure& f : kFigures) {
        const std::vector<double>& values = v.*f.values;
        if (values.empty()) {
          out << fmt::format(", \"{}\": null", f.name);
          continue;
        }
        const SeedSpread s = seed_spread(values);
        out << fmt::format(", \"{}\": {{\"median\": {}, \"min\": {}, \"max\": {}", f.name,
                           json_number(s.median, f), json_number(s.low, f), json_number(s.high, f));
        if (const auto r = f.reduced ? reduction_of(v, f) : std::nullopt)
          out << fmt::format(", \"reduction\": {}, \"reduction_low\": {}, \"reduction_high\": {}",
                             json_fraction(r->estimate), json_fraction(r->low),
                             json_fraction(r->high));
        out << "}";
      }
      out << (i + 1 < variants.size() ? "},\n" : "}\n");
    }
    out << "]\n";
    return 0;
  }

  // Table and Markdown share the columns.
  QueryResult table;
  table.columns = {"model", "variant", "runs", "reached"};
  for (const Figure* f : shown) table.columns.push_back(f->title);
  if (options.baseline) {
    for (const Figure* f : shown)
      if (f->reduced) table.columns.push_back(std::string("reduction: ") + f->title);
  }
  bool few_seeds = false, repeated_seeds = false;
  for (const VariantRuns& v : variants) {
    std::vector<std::optional<std::string>> row{v.model, v.name, runs_text(v),
                                                std::to_string(v.reached)};
    repeated_seeds = repeated_seeds || distinct_seeds(v) < v.runs;
    for (const Figure* f : shown) row.push_back(spread_text(v.*f->values, *f));
    if (options.baseline) {
      const auto base = baselines.find(v.model);
      const int64_t seeds = base == baselines.end()
                                ? distinct_seeds(v)
                                : std::min(distinct_seeds(v), distinct_seeds(*base->second));
      for (const Figure* f : shown) {
        if (!f->reduced) continue;
        const std::optional<Reduction> r = reduction_of(v, *f);
        const bool flagged = r && seeds < kFewSeeds;
        few_seeds = few_seeds || flagged;
        row.push_back(reduction_text(r) + (flagged ? fmt::format(" ({} seeds)", seeds) : ""));
      }
    }
    table.rows.push_back(std::move(row));
  }
  if (options.format == "table") {
    out << render_text_table(table, std::string::npos);
    out << "median [min–max] over seeds; ∞: a seed that did not reach the target";
    if (options.baseline)
      out << "; reduction: 1 - median / baseline's median [95% bootstrap interval]";
    out << fmt::format(
        "; projected s: MoE time to target at full size, {} ranks, {} tokens/rank, {} (lrmoe "
        "project)\n",
        kHeadlineRanks, kHeadlineTokens, kHeadlineProfile);
    if (few_seeds)
      out << fmt::format(
          "(N seeds): an interval from fewer than {} seeds on one side; too few to read as one\n",
          kFewSeeds);
    if (repeated_seeds)
      out << "seeds repeat: runs of one configuration with the same seed (a sweep cell run "
             "again, or runs named twice over); their spread is not the seeds'\n";
    for (const auto& [model, keys] : grouping.differing)
      out << fmt::format("the variants of {} differ in: {}\n", model, differing_keys_text(keys));
    out << left_out;
    write_projection_table(variants, baselines, out);
  } else if (options.format == "csv") {
    write_csv(variants, options.baseline.has_value(), reduction_of, out);
  } else {
    out << "| " << fmt::format("{}", fmt::join(table.columns, " | ")) << " |\n|";
    for (std::size_t c = 0; c < table.columns.size(); ++c) out << " --- |";
    out << "\n";
    for (const auto& row : table.rows) {
      out << "|";
      for (const auto& cell : row) out << " " << *cell << " |";
      out << "\n";
    }
    if (!left_out.empty()) out << "\n" << left_out;
  }
  return 0;
}

}  // namespace lrmoe
