// Every experiment and sweep the project ships runs under every bundle and with every built-in
// policy swapped in: a parameter written for one plugin never makes another choice unusable
// (Note [Plugin parameters] in docs/notes.md).
#include <toml++/toml.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/config/experiment_loader.hpp"
#include "core/config/policy_sections.hpp"
#include "core/config/sweep_spec.hpp"
#include "core/plugins/policy_set.hpp"
#include "support/builtin_policies.hpp"

namespace fs = std::filesystem;
using Catch::Contains;

namespace {

// An experiment to load: a file and the overrides a sweep cell adds to it.
struct ShippedCase {
  std::string label;
  fs::path file;
  std::vector<std::string> overrides;
};

// Every experiment file under experiments/ (hardware profiles aside) and every cell of every
// shipped sweep. A sweep is the file with axes.
std::vector<ShippedCase> shipped_cases() {
  std::vector<ShippedCase> cases;
  const fs::path root = fs::path(LRMOE_SOURCE_DIR) / "experiments";
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const fs::path& path = entry.path();
    if (path.extension() != ".toml" || path.parent_path().filename() == "hardware") continue;
    const toml::table document = toml::parse_file(path.string());
    if (!document.contains("axis")) {
      cases.push_back({path.string(), path, {}});
      continue;
    }
    const lrmoe::SweepSpec sweep = lrmoe::load_sweep_spec(path);
    for (const lrmoe::SweepCell& cell : sweep.cells) {
      cases.push_back(
          {path.string() + " [" + cell.label() + "]", sweep.experiment, sweep.overrides(cell)});
    }
  }
  return cases;
}

// One choice on top of a case: a bundle, and optionally one plugin of one kind.
struct Choice {
  std::string bundle;
  std::optional<lrmoe::PolicyKind> kind;
  std::string plugin;

  // policy_sections() lists the kinds in PolicyKind's order.
  const lrmoe::PolicySection& section() const {
    return lrmoe::policy_sections().at(static_cast<std::size_t>(*kind));
  }
};

std::vector<Choice> every_choice() {
  const lrmoe::PolicyKind kinds[] = {lrmoe::PolicyKind::Placement, lrmoe::PolicyKind::Metric,
                                     lrmoe::PolicyKind::Selection, lrmoe::PolicyKind::Routing};
  std::vector<Choice> choices;
  for (const std::string& bundle : lrmoe::bundle_names()) {
    choices.push_back({bundle, std::nullopt, ""});
    for (const lrmoe::PolicyKind kind : kinds) {
      for (const std::string& plugin : lrmoe_test::builtin_catalog().names(kind))
        choices.push_back({bundle, kind, plugin});
    }
  }
  return choices;
}

}  // namespace

TEST_CASE(
    "every shipped experiment and sweep cell loads its policies under every bundle and "
    "every built-in plugin",
    "[config][plugins]") {
  const std::vector<ShippedCase> cases = shipped_cases();
  const std::vector<Choice> choices = every_choice();
  REQUIRE(cases.size() > 10);
  int loaded = 0;
  int refused_as_designed = 0;
  for (const ShippedCase& shipped : cases) {
    for (const Choice& choice : choices) {
      std::vector<std::string> overrides = shipped.overrides;
      overrides.push_back("policies.bundle=" + choice.bundle);
      if (choice.kind) overrides.push_back(choice.section().section + ".name=" + choice.plugin);
      INFO(shipped.label << " with " << overrides.back());
      const lrmoe::Experiment experiment = lrmoe::load_experiment(shipped.file, overrides);
      // The scalable plan refuses, by design, a routing or selection that needs every pair
      // (Note [Scalable planning]); that refusal is the only one allowed.
      const bool scalable_refuses =
          experiment.policies.planning == lrmoe::Planning::Scalable && choice.kind &&
          !lrmoe::plans_scalably(*lrmoe_test::builtin_catalog().find(*choice.kind, choice.plugin));
      if (scalable_refuses) {
        CHECK_THROWS_WITH(
            lrmoe::create_policy_set(experiment.policies, lrmoe_test::builtin_catalog()),
            Contains("policies.planning = \"scalable\""));
        ++refused_as_designed;
        continue;
      }
      CHECK_NOTHROW(lrmoe::create_policy_set(experiment.policies, lrmoe_test::builtin_catalog()));
      ++loaded;
    }
  }
  CHECK(loaded > 1000);
  CHECK(refused_as_designed > 0);
}
