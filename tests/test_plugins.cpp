// The plugin loader: every error a user can cause is one line naming the file or setting and
// what to do; and the plugin of docs/PLUGINS.md, built out of tree with find_package(lrmoe), loads
// and trains.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>

#include "core/config/experiment_loader.hpp"
#include "core/plugins/policy_parameters.hpp"
#include "core/plugins/policy_set.hpp"
#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/temp_folder.hpp"

using namespace lrmoe;
using Catch::Contains;
using Catch::StartsWith;

namespace {

const std::string kBuiltin = LRMOE_BUILTIN_PLUGIN_DIR;
const std::string kFixtures = LRMOE_PLUGIN_FIXTURES;

std::string discovery_error(const std::vector<std::filesystem::path>& folders) {
  try {
    PluginCatalog::discover(folders);
  } catch (const PluginError& error) {
    return error.what();
  }
  FAIL("no PluginError");
  return "";
}

std::string policy_error(const PoliciesConfig& policies) {
  try {
    create_policy_set(policies, PluginCatalog::discover({kBuiltin}));
  } catch (const PluginError& error) {
    return error.what();
  }
  FAIL("no PluginError");
  return "";
}

PoliciesConfig fixed_bundle() {
  return load_experiment_text("[model]\npreset = \"tiny-moe\"\n", "tiny.toml").policies;
}

// The PluginError of creating the fixed bundle with the metric `metric` of the fixture folder.
std::string creation_error(const std::string& fixture, const std::string& metric) {
  PoliciesConfig policies = fixed_bundle();
  policies.metric.name = metric;
  try {
    create_policy_set(policies, PluginCatalog::discover({kBuiltin, kFixtures + "/" + fixture}));
  } catch (const PluginError& error) {
    return error.what();
  }
  FAIL("no PluginError");
  return "";
}

}  // namespace

TEST_CASE("the built-in plugins are found with their kinds, versions and hashes", "[plugins]") {
  const PluginCatalog catalog = PluginCatalog::discover({kBuiltin});
  CHECK(catalog.names(PolicyKind::Placement) ==
        std::vector<std::string>{"fixed_ownership", "lrmoe", "symi"});
  CHECK(catalog.names(PolicyKind::Metric).size() == 4);
  CHECK(catalog.names(PolicyKind::Selection).size() == 4);
  CHECK(catalog.names(PolicyKind::Routing).size() == 3);
  const PluginInfo* symi = catalog.find(PolicyKind::Placement, "symi");
  REQUIRE(symi != nullptr);
  CHECK(symi->sha256.size() == 64);
  CHECK(symi->path.filename() == "symi.so");
  // The same folder twice is read once.
  CHECK(PluginCatalog::discover({kBuiltin, kBuiltin}).plugins().size() == catalog.plugins().size());

  PoliciesConfig policies = fixed_bundle();
  policies.placement.settings["fixed_ownership"].parameters["capacity_factor"] = {int64_t{2},
                                                                                  "t.toml:3:19"};
  const PolicySet set = create_policy_set(policies, catalog);
  REQUIRE(set.records.size() == 4);
  CHECK(set.records[0].name == "fixed_ownership");
  // an integer where a number is declared
  CHECK(set.records[0].parameters ==
        "capacity = -1\ncapacity_factor = 2.0\ndrop = \"lowest_gate\"\n");
  CHECK(set.records[3].kind == "routing");
}

TEST_CASE("plugin errors are one line naming the file or setting and the fix", "[plugins]") {
  SECTION("a folder that does not exist") {
    CHECK_THAT(
        discovery_error({"/no/such/folder"}),
        Contains("plugin folder /no/such/folder does not exist") && Contains("LRMOE_PLUGIN_PATH"));
  }
  SECTION("a library without the entry points") {
    CHECK_THAT(
        discovery_error({kFixtures + "/not_a_plugin"}),
        Contains("not_a_plugin.so: not an lrmoe plugin (no 'lrmoe_plugin_abi' entry point)"));
  }
  SECTION("another plugin-API version") {
    CHECK_THAT(discovery_error({kFixtures + "/other_api"}),
               Contains(fmt::format("other_api.so: built for plugin API {} and LibTorch",
                                    kPluginApiVersion + 1)) &&
                   Contains(fmt::format("but this runner uses plugin API {}", kPluginApiVersion)) &&
                   Contains("rebuild it"));
  }
  SECTION("another LibTorch version") {
    CHECK_THAT(
        discovery_error({kFixtures + "/other_torch"}),
        Contains(fmt::format("LibTorch {}.{}.", TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR + 1)) &&
            Contains(fmt::format("this runner uses plugin API {} and LibTorch {}.{}.{}",
                                 kPluginApiVersion, TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR,
                                 TORCH_VERSION_PATCH)));
  }
  SECTION("two plugins with one name") {
    CHECK_THAT(discovery_error({kBuiltin, kFixtures + "/duplicate_gate"}),
               Contains("duplicate_gate.so: a metric plugin named 'gate' is already loaded from") &&
                   Contains("gate.so"));
  }
  SECTION("a plugin name nothing has") {
    PoliciesConfig policies = fixed_bundle();
    policies.placement.name = "symmi";
    CHECK_THAT(policy_error(policies),
               Contains("[policies.placement] name = \"symmi\": no placement plugin has "
                        "this name; did you mean 'symi'?") &&
                   Contains("lrmoe plugins"));
  }
  SECTION("a parameter the plugin does not declare") {
    PoliciesConfig policies = fixed_bundle();
    policies.placement.settings["fixed_ownership"].parameters["capacity_factr"] = {1.0,
                                                                                   "exp.toml:9:18"};
    CHECK(policy_error(policies) ==
          "exp.toml:9:18: the placement plugin 'fixed_ownership' has no parameter "
          "'capacity_factr'; did you mean "
          "'capacity_factor'?");
    PoliciesConfig no_parameters = fixed_bundle();
    no_parameters.metric.settings["gate"].parameters["power"] = {2.0, "exp.toml:4:9"};
    CHECK_THAT(policy_error(no_parameters),
               Contains("has no parameter 'power'; it takes no parameters"));
  }
  SECTION("a table of parameters for a plugin that is not chosen is still checked") {
    // fixed_ownership is chosen; the lrmoe placement's table is not used, but its mistakes are
    // found now rather than when lrmoe is chosen.
    PoliciesConfig policies = fixed_bundle();
    policies.placement.settings["lrmoe"] = {"exp.toml:7:20",
                                            {{"keep_fractoin", {0.5, "exp.toml:8:17"}}}};
    CHECK_THAT(policy_error(policies),
               StartsWith("exp.toml:8:17: the placement plugin 'lrmoe' has no parameter "
                          "'keep_fractoin'; did you mean 'keep_fraction'?"));
    policies.placement.settings["lrmoe"] = {"exp.toml:7:20",
                                            {{"keep_fraction", {0.5, "exp.toml:8:17"}}}};
    CHECK_NOTHROW(create_policy_set(policies, PluginCatalog::discover({kBuiltin})));
    policies.placement.settings["lrmo"] = {"exp.toml:9:20", {}};
    CHECK(policy_error(policies) ==
          "exp.toml:9:20: [policies.placement.lrmo]: a table of parameters is named after its "
          "plugin, and no placement plugin is named 'lrmo'; did you mean 'lrmoe'?");
  }
  SECTION("a bad parameter value") {
    PoliciesConfig policies = fixed_bundle();
    auto& parameters = policies.placement.settings["fixed_ownership"].parameters;
    parameters["capacity_factor"] = {-1.0,
                                     "--set policies.placement.fixed_ownership.capacity_factor"};
    CHECK(policy_error(policies) ==
          "--set policies.placement.fixed_ownership.capacity_factor: parameter 'capacity_factor' "
          "of the placement plugin 'fixed_ownership' must be in 0 .. 1000000, got -1");
    parameters["capacity_factor"] = {std::string("high"), "exp.toml:9:19"};
    CHECK_THAT(policy_error(policies), Contains("exp.toml:9:19: parameter 'capacity_factor'") &&
                                           Contains("must be a number"));
  }
}

TEST_CASE("a plugin that misbehaves while loading or creating is refused naming its library",
          "[plugins]") {
  SECTION("a default outside the declared range") {
    CHECK_THAT(discovery_error({kFixtures + "/default_out_of_range"}),
               Contains("default_out_of_range.so: the metric plugin 'declared_badly' declares "
                        "parameter 'power' whose default is not allowed") &&
                   Contains("must be in 0 .. 2, got 5") && Contains("rebuild it"));
  }
  SECTION("a minimum above the maximum") {
    CHECK_THAT(discovery_error({kFixtures + "/minimum_above_maximum"}),
               Contains("declares parameter 'power' with minimum 2 above maximum 0"));
  }
  SECTION("a NaN default") {
    CHECK_THAT(
        discovery_error({kFixtures + "/nan_default"}),
        Contains("whose default is not allowed") && Contains("must be a finite number, got nan"));
  }
  SECTION("a parameter name that an experiment could not write as a bare key") {
    CHECK_THAT(discovery_error({kFixtures + "/name_not_a_key"}),
               Contains("declares parameter 'two words' whose name is not only letters, digits"));
  }
  SECTION("a descriptor function that throws") {
    CHECK_THAT(discovery_error({kFixtures + "/descriptor_throws"}),
               Contains("the plugin library " + kFixtures +
                        "/descriptor_throws/descriptor_throws.so: lrmoe_plugin_descriptor "
                        "failed: cannot describe myself"));
  }
  SECTION("a factory that returns no object") {
    CHECK_THAT(creation_error("factory_returns_null", "misbehaving"),
               Contains("the metric plugin 'misbehaving' (") &&
                   Contains("factory_returns_null.so): its factory returned no object"));
  }
  SECTION("a factory that makes another kind of policy than its descriptor says") {
    CHECK_THAT(creation_error("factory_of_another_kind", "misbehaving"),
               Contains("factory_of_another_kind.so): its descriptor says metric but its factory "
                        "made an object of another kind"));
  }
  SECTION("a constructor that throws something that is not a std::exception") {
    CHECK_THAT(creation_error("constructor_throws_int", "misbehaving"),
               Contains("constructor_throws_int.so): its factory threw something that is not a "
                        "std::exception"));
  }
  SECTION("a truncated library, which dlopen would map past its end (SIGBUS)") {
    lrmoe_test::TempFolder dir;
    std::ifstream in(kBuiltin + "/gate.so", std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(bytes.size() > 4096);
    dir.write("plugins/gate.so", bytes.substr(0, bytes.size() / 2));
    CHECK_THAT(discovery_error({dir.file("plugins")}),
               Contains("gate.so: not a loadable plugin library (") && Contains("truncated?") &&
                   Contains("remove it from the plugin folder"));
  }
  SECTION("a file named .so that is not a library") {
    lrmoe_test::TempFolder dir;
    dir.write("plugins/notes.so", "not a library\n");
    CHECK_THAT(discovery_error({dir.file("plugins")}),
               Contains("notes.so: not a loadable plugin library (14 bytes, too short for ELF)"));
  }
}

namespace {

// The fenced code blocks of a Markdown file that name a file in their info string
// ("```cpp file=quota_fraction.cpp"), by file name.
std::map<std::string, std::string> files_in_markdown(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::map<std::string, std::string> files;
  std::string line, name;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) != 0) {
      if (!name.empty()) files[name] += line + "\n";
      continue;
    }
    const std::size_t tag = line.find(" file=");
    name = name.empty() && tag != std::string::npos ? line.substr(tag + 6) : "";
  }
  return files;
}

// The ```sh blocks of the Markdown file's section `heading` ("## Running it"), in order.
std::vector<std::string> shell_blocks(const std::string& path, const std::string& heading) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<std::string> blocks;
  std::string line;
  bool in_section = false, in_block = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == heading;
    if (!in_section) continue;
    if (line.rfind("```", 0) == 0) {
      in_block = !in_block && line == "```sh";
      if (in_block) blocks.emplace_back();
      continue;
    }
    if (in_block) blocks.back() += line + "\n";
  }
  return blocks;
}

}  // namespace

TEST_CASE(
    "docs/PLUGINS.md works as written: its plugin builds out of tree against the install, loads "
    "and trains on the installed experiment, from the plugin's own folder",
    "[plugins][slow]") {
  using lrmoe_test::ChildProcess;
  lrmoe_test::TempFolder dir;
  const std::string page = std::string(LRMOE_SOURCE_DIR) + "/docs/PLUGINS.md";
  // The page's commands run as written, with a home of their own: `~/lrmoe` is the install.
  const std::string home = dir.file("home");
  std::filesystem::create_directories(home);
  auto shell = [&](const std::string& folder, const std::string& commands, const std::string& log) {
    ChildProcess child({"/usr/bin/env", "HOME=" + home, "/bin/bash", "-euo", "pipefail", "-c",
                        "cd '" + folder + "'\n" + commands},
                       dir.file(log));
    const int code = child.wait(std::chrono::seconds(600));
    INFO(commands);
    INFO(child.output());
    REQUIRE(code == 0);
    return child.output();
  };

  const std::vector<std::string> building = shell_blocks(page, "## Building it");
  const std::vector<std::string> running = shell_blocks(page, "## Running it");
  REQUIRE(building.size() == 2);
  REQUIRE(running.size() == 2);
  // "cmake --install build ...", in lrmoe's clone, where build/ is this build.
  const std::string clone = dir.file("clone");
  std::filesystem::create_directories(clone);
  std::filesystem::create_directory_symlink(LRMOE_BUILD_DIR, clone + "/build");
  shell(clone, building[0], "install.log");

  // The plugin's folder holds the page's two files; the rest runs there.
  const std::map<std::string, std::string> files = files_in_markdown(page);
  REQUIRE(files.size() == 2);
  REQUIRE(files.count("CMakeLists.txt") == 1);
  REQUIRE(files.count("quota_fraction.cpp") == 1);
  for (const auto& [name, text] : files) dir.write("quota_fraction/" + name, text);
  const std::string plugin = dir.file("quota_fraction");
  shell(plugin, building[1], "build.log");
  const std::string ran = shell(plugin, running[0], "run.log");
  CHECK_THAT(ran, Contains("selection quota_fraction 1.0.0") && Contains("fraction"));
  const std::string queried = shell(plugin, running[1], "query.log");
  CHECK_THAT(queried, Contains("quota_fraction") && Contains("fraction = 0.25"));

  auto store = ResultsStore::open_read_only(plugin + "/results.db");
  auto recorded = store->query(
      "SELECT name, version, parameters, length(sha256) FROM run_plugins WHERE kind = 'selection'");
  REQUIRE(recorded.rows.size() == 1);
  CHECK(recorded.rows[0][0].value() == "quota_fraction");
  CHECK(recorded.rows[0][1].value() == "1.0.0");
  CHECK(recorded.rows[0][2].value() == "fraction = 0.25\n");
  CHECK(recorded.rows[0][3].value() == "64");
  const RunSummary trained = store->list_runs().front();
  CHECK(trained.status == "finished");
  const int64_t run_id = trained.id;
  // A quarter of the quota (the budget's, about 60% of the pairs): the layers keep about a
  // seventh of their pairs, never more than a quarter (ceil adds at most one per expert).
  auto kept = store->query(fmt::format(
      "SELECT sum(pairs_kept), sum(pairs_routed) FROM moe_layer_steps WHERE run = {}", run_id));
  const double share = std::stod(kept.rows[0][0].value()) / std::stod(kept.rows[0][1].value());
  CHECK(share > 0.05);
  CHECK(share < 0.3);
}
