// The user errors of tests/cases/user_errors.toml, each run against the real `lrmoe` program: one
// line "lrmoe: ..." naming what is wrong, the documented exit code, and the results database as
// it was (its finished run unharmed, no run left `running`).

#include <sys/stat.h>

#include <toml++/toml.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/temp_folder.hpp"

using lrmoe_test::kTinyExperiment;
using lrmoe_test::run_lrmoe;
using lrmoe_test::TempFolder;

namespace {

struct UserErrorCase {
  std::string name;
  std::vector<std::string> args;
  std::optional<std::string> file;
  int64_t exit = 1;
  std::string says;
};

std::vector<UserErrorCase> read_cases() {
  const toml::table document =
      toml::parse_file(std::string(LRMOE_SOURCE_DIR) + "/tests/cases/user_errors.toml");
  std::vector<UserErrorCase> cases;
  for (const toml::node& node : *document["case"].as_array()) {
    const toml::table& entry = *node.as_table();
    UserErrorCase c;
    c.name = entry["name"].value<std::string>().value();
    for (const toml::node& arg : *entry["args"].as_array())
      c.args.push_back(arg.value<std::string>().value());
    c.file = entry["file"].value<std::string>();
    c.exit = entry["exit"].value<int64_t>().value();
    c.says = entry["says"].value<std::string>().value();
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string substitute(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [name, value] : values)
    text = std::regex_replace(text, std::regex("\\{" + name + "\\}"), value);
  return text;
}

std::vector<std::string> lines_starting(const std::string& output, const std::string& prefix) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) lines.push_back(line);
  }
  return lines;
}

}  // namespace

TEST_CASE("every user error of tests/cases/user_errors.toml is one located line, nothing lost",
          "[e2e]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  {
    auto [seed_code, seed_output] =
        run_lrmoe({"run", kTinyExperiment, "--db", db, "--set", "train.max_steps=2", "--set",
                   "train.warmup_steps=1"},
                  dir.file("seed.log"));
    INFO(seed_output);
    REQUIRE(seed_code == 0);
  }
  const std::string fifo = dir.file("pipe");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const std::map<std::string, std::string> values{{"tiny", kTinyExperiment},
                                                  {"dir", dir.path().string()},
                                                  {"db", db},
                                                  {"fifo", fifo},
                                                  {"fixtures", LRMOE_PLUGIN_FIXTURES},
                                                  {"file", dir.file("case.toml")}};

  const std::vector<UserErrorCase> cases = read_cases();
  REQUIRE(cases.size() >= 10);
  // One pass over the cases (not a section each, which would train the seed run again per case).
  for (const UserErrorCase& c : cases) {
    if (c.file) dir.write("case.toml", substitute(*c.file, values));
    std::vector<std::string> args;
    for (const std::string& arg : c.args) args.push_back(substitute(arg, values));
    auto [code, output] = run_lrmoe(args, dir.file("case.log"), std::chrono::seconds(120));
    INFO("case: " << c.name << "\n" << output);
    CHECK(code == c.exit);
    if (c.exit == 0) {
      CHECK_THAT(output, Catch::Contains(c.says));
      continue;
    }
    const std::vector<std::string> errors = lines_starting(output, "lrmoe: ");
    CHECK(errors.size() == 1);
    if (!errors.empty()) CHECK_THAT(errors.front(), Catch::Contains(c.says));
  }

  const auto runs = lrmoe::ResultsStore::open_read_only(db)->list_runs();
  const auto seed = std::find_if(runs.begin(), runs.end(), [](const auto& r) { return r.id == 1; });
  REQUIRE(seed != runs.end());
  CHECK(seed->status == "finished");
  CHECK(seed->steps == 2);
  for (const auto& run : runs) CHECK(run.status != "running");
}
