#include "runner/compare_plots.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "core/system/search_folders.hpp"
#include "runner/child_status.hpp"
#include "runner/headline_projection.hpp"
#include "runner/json_text.hpp"

namespace fs = std::filesystem;

namespace lrmoe {
namespace {

struct AxisNames {
  PlotAxis axis;
  const char* option;  // --x, and "x" in comparison.json
  const char* figure;  // lrmoe compare's time to target along it
};
constexpr AxisNames kAxes[] = {
    {PlotAxis::Steps, "steps", "steps_to_target"},
    {PlotAxis::Critical, "critical", "moe_critical_seconds_to_target"},
    {PlotAxis::Modeled, "modeled", "moe_modeled_seconds_to_target"},
    {PlotAxis::Projected, "projected", "projected_moe_seconds_to_target"},
};

const AxisNames& names_of(PlotAxis axis) {
  for (const AxisNames& a : kAxes)
    if (a.axis == axis) return a;
  throw std::logic_error("compare --plot: an axis without names");
}

fs::path plotting_script() {
  const fs::path folder =
      folder_beside_executable({"plotting", fs::path("..") / "share" / "lrmoe" / "plotting"});
  const fs::path script = folder / "plot_comparison.py";
  if (folder.empty() || !fs::exists(script))
    throw std::runtime_error(
        "compare --plot: plot_comparison.py is not beside this lrmoe (plotting/) nor in "
        "share/lrmoe/plotting; rebuild or reinstall lrmoe");
  return script;
}

std::string python() {
  if (const char* chosen = std::getenv("LRMOE_PYTHON"); chosen && *chosen) return chosen;
  return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

const ProjectionRecord* headline_of(const std::map<int64_t, std::vector<ProjectionRecord>>& all,
                                    int64_t run) {
  const auto found = all.find(run);
  if (found == all.end()) return nullptr;
  for (const ProjectionRecord& p : found->second)
    if (is_headline_projection(p)) return &p;
  return nullptr;
}

// Before anything is drawn: a figure that silently dropped seeds would misstate its medians.
void require_projections(const PlotRequest& request, const std::vector<PlotVariant>& variants,
                         const std::map<int64_t, std::vector<ProjectionRecord>>& projections) {
  std::vector<int64_t> missing;
  for (const PlotVariant& v : variants)
    for (int64_t run : v.runs)
      if (!headline_of(projections, run)) missing.push_back(run);
  if (missing.empty()) return;
  const bool one = missing.size() == 1;
  throw std::runtime_error(fmt::format(
      "compare --plot --x projected: {} {} {} no projection at {} ranks x {} tokens/rank, {}; "
      "make {} with: lrmoe project {} --db {} --ranks {} --tokens-per-rank {} --profile {}",
      one ? "run" : "runs", fmt::join(missing, ", "), one ? "has" : "have", kHeadlineRanks,
      kHeadlineTokens, kHeadlineProfile, one ? "it" : "them", fmt::join(missing, " "),
      request.database, kHeadlineRanks, kHeadlineTokens, kHeadlineProfile));
}

// A variant's projected axis: its full-size configuration and, per run, the projected MoE
// seconds per step (the mean over the replayed steps that lrmoe project multiplies by the run's
// steps); null for a run whose plans do not fit at full size, which has no such time.
std::string projected_fields(const PlotVariant& v,
                             const std::map<int64_t, std::vector<ProjectionRecord>>& projections,
                             std::ostream& notes) {
  std::string configuration;
  std::vector<std::string> per_step;
  for (int64_t run : v.runs) {
    const ProjectionRecord& p = *headline_of(projections, run);
    configuration = fmt::format("{}, {} ranks x {} tokens/rank, {}", p.model, p.ranks,
                                p.tokens_per_rank, p.profile);
    if (p.failed) {
      notes << fmt::format(
          "compare --plot --x projected: run {} left out: its plans do not fit at {}: {}\n", run,
          configuration, *p.failed);
      per_step.emplace_back("null");
      continue;
    }
    per_step.push_back(fmt::format(
        "{}", p.compute_seconds + p.all_to_all_seconds + p.gather_seconds + p.transfer_seconds));
  }
  return fmt::format(", \"projection\": {}, \"projected_seconds_per_step\": [{}]",
                     json_string(configuration), fmt::join(per_step, ", "));
}

// As lrmoe compare --format json prints a reduction (4 decimals); null for minus infinity (a
// median that never reached the target), which JSON has no number for.
std::string reduction_number(double value) {
  return std::isfinite(value) ? fmt::format("{:.4f}", value) : "null";
}

std::string reduction_field(const std::optional<Reduction>& r) {
  if (!r) return "null";
  return fmt::format("{{\"estimate\": {}, \"low\": {}, \"high\": {}}}",
                     reduction_number(r->estimate), reduction_number(r->low),
                     reduction_number(r->high));
}

void write_spec(const PlotRequest& request, const std::vector<PlotVariant>& variants,
                const std::map<int64_t, std::vector<ProjectionRecord>>& projections,
                const fs::path& spec, std::ostream& notes) {
  std::ofstream out(spec);
  const std::string name = request.sweeps.empty()
                               ? std::string("comparison")
                               : fmt::format("{}", fmt::join(request.sweeps, "+"));
  out << fmt::format("{{\"name\": {}, \"x\": \"{}\", \"baseline\": {},\n \"variants\": [\n",
                     json_string(name), names_of(request.x).option,
                     request.baseline ? json_string(*request.baseline) : "null");
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const PlotVariant& v = variants[i];
    out << fmt::format(
        "  {{\"model\": {}, \"name\": {}, \"runs\": [{}], \"reached\": {}, \"reduction\": "
        "{}{}}}{}\n",
        json_string(v.model), json_string(v.name), fmt::join(v.runs, ", "), v.reached,
        reduction_field(v.reduction),
        request.x == PlotAxis::Projected ? projected_fields(v, projections, notes) : "",
        i + 1 < variants.size() ? "," : "");
  }
  out << "]}\n";
  if (!out) throw std::runtime_error("compare --plot: cannot write " + spec.string());
}

}  // namespace

PlotAxis plot_axis_named(const std::string& name) {
  for (const AxisNames& a : kAxes)
    if (name == a.option) return a.axis;
  throw std::invalid_argument("--x " + name + ": use steps, critical, modeled or projected");
}

std::string time_to_target_figure(PlotAxis axis) {
  return names_of(axis).figure;
}

void write_comparison_plots(const PlotRequest& request, const std::vector<PlotVariant>& variants,
                            const std::map<int64_t, std::vector<ProjectionRecord>>& projections,
                            const fs::path& dir, std::ostream& notes) {
  if (request.x == PlotAxis::Projected) require_projections(request, variants, projections);
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    throw std::invalid_argument(
        fmt::format("--plot {}: cannot make the folder for the figures ({}); give a folder path",
                    dir.string(), error.message()));
  }
  const fs::path spec = dir / "comparison.json";
  write_spec(request, variants, projections, spec, notes);
  const std::string interpreter = python();
  const int code = run_to_end({interpreter, plotting_script().string(), "--db", request.database,
                               "--spec", spec.string(), "--out", dir.string()});
  if (code != 0)
    throw std::runtime_error(fmt::format(
        "compare --plot: {} plot_comparison.py failed (exit {}, its message above); it needs "
        "matplotlib: bash scripts/setup.sh installs it for /usr/bin/python3, or set LRMOE_PYTHON "
        "to a python3 that has it",
        interpreter, code));
}

}  // namespace lrmoe
