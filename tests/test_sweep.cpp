// Sweeps: the sweep file's cells (product order, zipped keys, fixed settings) and its errors with
// their places; the database's sweep records (cells found again by their settings, a changed
// experiment refused, runs tagged per cell); and `lrmoe sweep` end to end on the tiny model:
// parallel cells, a resume that skips finished cells and restarts an interrupted one, Ctrl-C.

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/config/experiment_loader.hpp"
#include "core/config/sweep_spec.hpp"
#include "core/train/checkpoint.hpp"
#include "runner/run_info.hpp"
#include "store/local_process.hpp"
#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/store_samples.hpp"
#include "support/temp_folder.hpp"

using Catch::Matchers::Contains;
using lrmoe::SweepSpec;
using lrmoe_test::kTinyExperiment;
using lrmoe_test::run_lrmoe;
using lrmoe_test::TempFolder;

namespace {

std::string config_error_of(const TempFolder& dir, const std::string& text) {
  const auto file = dir.write("sweep.toml", text);
  try {
    lrmoe::load_sweep_spec(file);
  } catch (const lrmoe::ConfigError& error) {
    return error.what();
  }
  FAIL("expected a ConfigError");
  return "";
}

// Runs with at least three committed steps; 0 while the database is being created.
int64_t runs_with_steps(const std::string& db) {
  try {
    if (!std::filesystem::exists(db)) return 0;
    return std::stoll(lrmoe_test::scalar(
        *lrmoe::ResultsStore::open_read_only(db),
        "SELECT count(*) FROM (SELECT run FROM steps GROUP BY run HAVING count(*) >= 3)"));
  } catch (const lrmoe::StoreError&) {
    return 0;
  }
}

std::vector<std::string> labels(const SweepSpec& spec) {
  std::vector<std::string> all;
  for (const lrmoe::SweepCell& cell : spec.cells) all.push_back(cell.label());
  return all;
}

lrmoe::SweepRecord sweep_record(const std::vector<std::string>& seeds, const std::string& hash) {
  lrmoe::SweepRecord record{"seeds", "seeds.toml", {}, lrmoe::SweepKind::Train};
  for (const std::string& seed : seeds) {
    record.cells.push_back(
        {"experiment.seed=" + seed, "seed=" + seed, hash, {{"experiment.seed", seed}}, "", ""});
  }
  return record;
}

}  // namespace

TEST_CASE(
    "a sweep's cells are the product of its axes, the first axis slowest, zipped keys "
    "together",
    "[sweep]") {
  TempFolder dir;
  const auto file = dir.write("sweeps/s.toml", R"(
experiment = "../base.toml"
set = ["train.max_steps=5"]
[[axis]]
keys = ["policies.bundle", "cluster.slots_per_rank"]
values = [["fixed", 2], ["lrmoe", 3]]
[[axis]]
key = "experiment.seed"
values = [1, 2, 3]
[[axis]]
key = "train.lr"
values = [1e-3]
)");
  const SweepSpec spec = lrmoe::load_sweep_spec(file);
  CHECK(spec.name == "s");  // the file's name without .toml
  CHECK(spec.experiment == (dir.path() / "base.toml").lexically_normal());
  CHECK(spec.processes == 1);
  REQUIRE(spec.cells.size() == 6);
  CHECK(labels(spec) ==
        std::vector<std::string>{"bundle=fixed, slots_per_rank=2, seed=1, lr=0.001",
                                 "bundle=fixed, slots_per_rank=2, seed=2, lr=0.001",
                                 "bundle=fixed, slots_per_rank=2, seed=3, lr=0.001",
                                 "bundle=lrmoe, slots_per_rank=3, seed=1, lr=0.001",
                                 "bundle=lrmoe, slots_per_rank=3, seed=2, lr=0.001",
                                 "bundle=lrmoe, slots_per_rank=3, seed=3, lr=0.001"});
  CHECK(spec.cells[4].index == 4);
  CHECK(spec.overrides(spec.cells[4]) ==
        std::vector<std::string>{"train.max_steps=5", "policies.bundle=\"lrmoe\"",
                                 "cluster.slots_per_rank=3", "experiment.seed=2",
                                 "train.lr=0.001"});
}

TEST_CASE(
    "a model axis names each cell's model and stays out of its variant, and labels name values",
    "[sweep]") {
  TempFolder dir;
  const auto file = dir.write("m.toml", R"(
experiment = "base.toml"
[[axis]]
key = "model.preset"
values = ["qwen3-mini", "glm45-mini"]
[[axis]]
kind = "model"
variants = [
  { label = "narrow", "model.expert_ffn_size" = 64 },
  { "model.expert_ffn_size" = 128 },
]
[[axis]]
key = "experiment.seed"
values = [1]
[[axis]]
key = "policies.bundle"
values = ["symi", "lrmoe"]
labels = ["SYMI", "LRMoE"]
)");
  const SweepSpec spec = lrmoe::load_sweep_spec(file);
  REQUIRE(spec.cells.size() == 8);
  CHECK(spec.cells[0].model == "qwen3-mini, narrow");
  CHECK(spec.cells[0].variant == "SYMI");
  CHECK(spec.cells[7].model == "glm45-mini, expert_ffn_size=128");
  CHECK(spec.cells[7].variant == "LRMoE");
  // The label is a name, not a setting.
  CHECK(spec.overrides(spec.cells[0]) ==
        std::vector<std::string>{"model.preset=\"qwen3-mini\"", "model.expert_ffn_size=64",
                                 "experiment.seed=1", "policies.bundle=\"symi\""});

  CHECK_THAT(config_error_of(dir,
                             "experiment = \"b.toml\"\n[[axis]]\nkey = \"a.b\"\n"
                             "values = [1, 2]\nlabels = [\"one\"]\n"),
             Contains("sweep.toml:5:10: labels must be an array of 2 strings, one per value"));
  CHECK_THAT(config_error_of(dir,
                             "experiment = \"b.toml\"\n[[axis]]\nkey = \"a.b\"\n"
                             "values = [1]\nkind = \"modle\"\n"),
             Contains("sweep.toml:5:8: unknown kind 'modle'") && Contains("did you mean 'model'"));
  CHECK_THAT(config_error_of(dir,
                             "experiment = \"b.toml\"\n[[axis]]\n"
                             "variants = [{ label = \"x\" }]\n"),
             Contains("the variant 'x' sets nothing"));
}

TEST_CASE(
    "a variant may span lines, as an inline table over several lines or as [[axis.variants]] "
    "tables",
    "[sweep]") {
  TempFolder dir;
  const auto inline_tables = dir.write("inline.toml", R"(
experiment = "base.toml"
[[axis]]
variants = [
  { "policies.bundle" = "lrmoe",   # the default metric
    "policies.placement.lrmoe.keep_fraction" = 0.5,
  },
  { "policies.bundle" = "fixed" },
]
[[axis]]
key = "experiment.seed"
values = [1, 2]
)");
  const auto tables = dir.write("tables.toml", R"(
experiment = "base.toml"
[[axis]]
[[axis.variants]]
"policies.bundle" = "lrmoe"
"policies.placement.lrmoe.keep_fraction" = 0.5
[[axis.variants]]
"policies.bundle" = "fixed"
[[axis]]
key = "experiment.seed"
values = [1, 2]
)");
  const std::vector<std::string> expected{"bundle=lrmoe, keep_fraction=0.5, seed=1",
                                          "bundle=lrmoe, keep_fraction=0.5, seed=2",
                                          "bundle=fixed, seed=1", "bundle=fixed, seed=2"};
  CHECK(labels(lrmoe::load_sweep_spec(inline_tables)) == expected);
  CHECK(labels(lrmoe::load_sweep_spec(tables)) == expected);
  // Lines after a joined inline table keep their numbers.
  CHECK_THAT(config_error_of(dir,
                             "experiment = \"b.toml\"\n[[axis]]\nvariants = [\n"
                             "  { \"a.b\" = 1,\n    \"c.d\" = 2 },\n]\nbogus = 1\n"),
             Contains("sweep.toml:7:") && Contains("unknown key 'bogus'"));
}

TEST_CASE("a variants axis gives each value its own keys, nested tables flattened", "[sweep]") {
  TempFolder dir;
  const auto file = dir.write("v.toml", R"(
experiment = "base.toml"
[[axis]]
variants = [
  { "policies.bundle" = "fixed" },
  { policies = { bundle = "symi", placement = { symi = { fit_budget = true } } } },
]
[[axis]]
key = "experiment.seed"
values = [1, 2]
)");
  const SweepSpec spec = lrmoe::load_sweep_spec(file);
  CHECK(labels(spec) == std::vector<std::string>{"bundle=fixed, seed=1", "bundle=fixed, seed=2",
                                                 "bundle=symi, fit_budget=true, seed=1",
                                                 "bundle=symi, fit_budget=true, seed=2"});
  CHECK(spec.overrides(spec.cells[2]) ==
        std::vector<std::string>{"policies.bundle=\"symi\"",
                                 "policies.placement.symi.fit_budget=true", "experiment.seed=1"});
  CHECK_THAT(config_error_of(dir,
                             "experiment = \"base.toml\"\n[[axis]]\nvariants = "
                             "[{\"a.b\" = 1}]\n[[axis]]\nkey = \"a.b\"\nvalues = [2]\n"),
             Contains("the key a.b is in two axes"));
}

TEST_CASE("a sweep file's mistakes are refused with their place and what to do", "[sweep]") {
  TempFolder dir;
  const std::string base = "experiment = \"base.toml\"\n";
  CHECK_THAT(config_error_of(dir, "[[axis]]\nkey = \"a.b\"\nvalues = [1]\n"),
             Contains("sweep.toml: no experiment; name the base experiment"));
  CHECK_THAT(config_error_of(dir, base), Contains("sweep.toml: no [[axis]] tables"));
  CHECK_THAT(config_error_of(dir, base + "axes = 1\n"),
             Contains("sweep.toml:2:8: unknown key 'axes' in a sweep file; did you mean 'axis'?"));
  CHECK_THAT(config_error_of(dir, base + "[[axis]]\nkey = \"a.b\"\nvalues = []\n"),
             Contains("sweep.toml:4:10: values must be a non-empty array"));
  CHECK_THAT(config_error_of(dir, base + "[[axis]]\nkey = \"a.b\"\nvalues = [[1, 2]]\n"),
             Contains("sweep.toml:4:11: a value of a.b must be a string, integer, float or "
                      "boolean, got array"));
  CHECK_THAT(config_error_of(dir, base + "[[axis]]\nkeys = [\"a.b\", \"c.d\"]\nvalues = [[1]]\n"),
             Contains("sweep.toml:4:11: each of values must be an array of 2 values, one per key"));
  CHECK_THAT(config_error_of(dir, base + "[[axis]]\nvalues = [1]\n"),
             Contains("needs one of key = \"section.key\", keys = [...] or variants = [...]"));
  CHECK_THAT(config_error_of(dir, base + "[[axis]]\nvariants = [{}]\n"),
             Contains("sweep.toml:3:13: each of variants must be a non-empty table"));
  CHECK_THAT(config_error_of(dir, base + "[[axis]]\nvariants = [{a.b = 1}]\nvalues = [1]\n"),
             Contains("sweep.toml:4:10: an [[axis]] with variants has no values"));
  CHECK_THAT(config_error_of(dir, base + "[[axis]]\nkey = \"a.b\"\nvalues = [1]\n"
                                         "[[axis]]\nkey = \"a.b\"\nvalues = [2]\n"),
             Contains("the key a.b is in two axes; zip them into one with keys"));
  CHECK_THAT(config_error_of(dir, base + "processes = 0\n[[axis]]\nkey = \"a.b\"\nvalues = [1]\n"),
             Contains("sweep.toml:2:13: processes must be an integer of at least 1"));
}

TEST_CASE("a resumed sweep finds its cells by their settings and refuses a changed experiment",
          "[sweep][store]") {
  TempFolder dir;
  auto store = lrmoe::ResultsStore::open(dir.file("r.db"));
  const lrmoe::SweepCellNumbers first = store->record_sweep(sweep_record({"1", "2"}, "h"));
  CHECK(first.cells == std::vector<int64_t>{0, 1});
  // Grown by a seed, listed in another order: the recorded cells keep their numbers.
  const lrmoe::SweepCellNumbers grown = store->record_sweep(sweep_record({"3", "2", "1"}, "h"));
  CHECK(grown.sweep == first.sweep);
  CHECK(grown.cells == std::vector<int64_t>{2, 1, 0});
  CHECK(lrmoe_test::scalar(*store, "SELECT value FROM sweep_cell_values WHERE cell = 2") == "3");
  CHECK_THAT(lrmoe_test::store_error_of([&] { store->record_sweep(sweep_record({"1"}, "x")); }),
             Contains("sweep 'seeds' cell 0 (seed=1) was recorded from an experiment that "
                      "resolved differently") &&
                 Contains("give this sweep another name"));
}

TEST_CASE("a sweep cell's runs are tagged, and its state is its last run's", "[sweep][store]") {
  TempFolder dir;
  auto store = lrmoe::ResultsStore::open(dir.file("r.db"));
  const lrmoe::SweepCellNumbers sweep = store->record_sweep(sweep_record({"1", "2"}, "h"));
  lrmoe::RunInfo info = lrmoe_test::sample_run("cell");
  info.sweep_cell = lrmoe::SweepCellTag{sweep.sweep, 1};
  const int64_t interrupted = store->begin_run(info);
  store->finish_run(interrupted, "interrupted", std::nullopt);
  const int64_t again = store->begin_run(info);
  store->finish_run(again, "finished", std::nullopt);

  const std::vector<lrmoe::SweepCellState> cells = store->sweep_cells(sweep.sweep);
  REQUIRE(cells.size() == 2);
  CHECK_FALSE(cells[0].run);
  CHECK(cells[0].status.empty());
  CHECK(cells[0].runs == 0);
  CHECK(cells[1].run == again);
  CHECK(cells[1].status == "finished");
  CHECK(cells[1].runs == 2);
  CHECK(lrmoe_test::scalar(*store, "SELECT status FROM sweep_results WHERE cell = 1") ==
        "finished");
}

TEST_CASE(
    "lrmoe sweep runs every cell in parallel, and run again skips the finished ones and "
    "restarts an interrupted one",
    "[sweep][e2e]") {
  TempFolder dir;
  const auto sweep = dir.write("grid.toml", "experiment = \"" + kTinyExperiment + "\"\n" + R"(
set = ["train.max_steps=3", "train.warmup_steps=1", "train.eval_every=3", "train.eval_batches=1"]
[[axis]]
key = "policies.bundle"
values = ["fixed", "lrmoe"]
[[axis]]
key = "experiment.seed"
values = [1, 2]
)");
  const std::string db = dir.file("grid.db");
  auto [code, output] =
      run_lrmoe({"sweep", sweep.string(), "--db", db, "--jobs", "2"}, dir.file("first.log"));
  INFO(output);
  REQUIRE(code == 0);
  CHECK_THAT(output, Contains("4 cells, 0 finished before, 4 to run, 2 at a time"));
  {
    auto store = lrmoe::ResultsStore::open_read_only(db);
    CHECK(lrmoe_test::scalar(*store,
                             "SELECT count(*) FROM sweep_results WHERE status = "
                             "'finished' AND runs = 1") == "4");
    CHECK(lrmoe_test::scalar(*store,
                             "SELECT seed FROM runs r JOIN sweep_results s ON s.run = "
                             "r.id WHERE s.label = 'bundle=lrmoe, seed=2'") == "2");
    CHECK(lrmoe_test::scalar(*store,
                             "SELECT policies FROM runs WHERE id = (SELECT run FROM "
                             "sweep_results WHERE cell = 0)") ==
          "fixed_ownership/gate/keep_all/owner");
    // Runs go by their sweep and cell, and say which model they trained.
    CHECK(lrmoe_test::scalar(*store,
                             "SELECT name || ' ' || model || ' ' || sweep || ' ' || cell FROM "
                             "run_summary WHERE id = (SELECT run FROM sweep_results WHERE cell = "
                             "3)") == "grid/3 tiny-moe grid 3");
  }
  // An interrupted cell (its process died) runs again; the finished ones are skipped.
  {
    auto store = lrmoe::ResultsStore::open(db);
    const int64_t run =
        std::stoll(lrmoe_test::scalar(*store, "SELECT run FROM sweep_results WHERE cell = 1"));
    store->finish_run(run, "interrupted", std::nullopt);
  }
  std::tie(code, output) =
      run_lrmoe({"sweep", sweep.string(), "--db", db, "--jobs", "2"}, dir.file("second.log"));
  REQUIRE(code == 0);
  CHECK_THAT(output, Contains("4 cells, 3 finished before, 1 to run"));
  auto store = lrmoe::ResultsStore::open_read_only(db);
  CHECK(store->list_runs().size() == 5);
  CHECK(lrmoe_test::scalar(*store,
                           "SELECT runs || ' ' || status FROM sweep_results WHERE cell = "
                           "1") == "2 finished");
}

TEST_CASE("lrmoe sweep refuses a cell whose settings are wrong before running any, naming it",
          "[sweep][e2e]") {
  TempFolder dir;
  const auto sweep = dir.write("bad.toml", "experiment = \"" + kTinyExperiment + "\"\n" + R"(
[[axis]]
key = "train.lr"
values = [0.01, -1.0]
)");
  const std::string db = dir.file("bad.db");
  const auto [code, output] = run_lrmoe({"sweep", sweep.string(), "--db", db}, dir.file("o.log"));
  CHECK(code == 1);
  // The place is the value's in the sweep file, not the base experiment's.
  CHECK_THAT(output,
             Contains("lrmoe: " + sweep.string() + ":5:17: cell 1 (lr=-1.0): --set train.lr"));
  CHECK_FALSE(std::filesystem::exists(db));

  // A misspelt plugin parameter in the sweep's `set`: found before any cell runs.
  const auto misspelt = dir.write("misspelt.toml", "experiment = \"" + kTinyExperiment + "\"\n" +
                                                       R"(set = ["train.max_steps=2",
       "policies.placement.lrmoe.keep_fractio=0.5"]
[[axis]]
key = "policies.bundle"
values = ["fixed", "lrmoe"]
)");
  const auto [misspelt_code, misspelt_output] =
      run_lrmoe({"sweep", misspelt.string(), "--db", db}, dir.file("m.log"));
  CHECK(misspelt_code == 1);
  CHECK_THAT(misspelt_output,
             Contains("lrmoe: " + misspelt.string() + ":3:8: cell 0") && Contains("keep_fractio"));
  CHECK_FALSE(std::filesystem::exists(db));
}

TEST_CASE("Ctrl-C on lrmoe sweep stops its running cells, recorded as stopped, and starts no more",
          "[sweep][e2e]") {
  TempFolder dir;
  const auto sweep = dir.write("long.toml", "experiment = \"" + kTinyExperiment + "\"\n" + R"(
set = ["train.max_steps=100000", "train.target_loss=0"]
[[axis]]
key = "experiment.seed"
values = [1, 2, 3]
)");
  const std::string db = dir.file("long.db");
  {
    lrmoe_test::ChildProcess child({LRMOE_BINARY, "sweep", sweep.string(), "--db", db, "-j", "2"},
                                   dir.file("sweep.log"));
    // Both running cells have begun their runs and recorded steps (a cell's process takes a
    // moment to start, longer against a large LibTorch).
    for (int i = 0; i < 600 && runs_with_steps(db) < 2; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(runs_with_steps(db) == 2);
    child.signal(SIGINT);  // to the sweep alone: it passes the signal on to its cells
    CHECK(child.wait(std::chrono::seconds(60)) == 130);
  }
  auto store = lrmoe::ResultsStore::open_read_only(db);
  const std::vector<lrmoe::RunSummary> runs = store->list_runs();
  REQUIRE(runs.size() == 2);  // the third cell never started
  for (const lrmoe::RunSummary& run : runs) CHECK(run.status == "stopped");
  CHECK(lrmoe_test::scalar(*store, "SELECT count(*) FROM sweep_results WHERE run IS NULL") == "1");
}

TEST_CASE(
    "lrmoe sweep continues a killed cell from its newest checkpoint, and a finished run's "
    "checkpoints are removed",
    "[sweep][e2e]") {
  TempFolder dir;
  const auto sweep = dir.write("one.toml", "experiment = \"" + kTinyExperiment + "\"\n" + R"(
set = ["train.max_steps=200", "train.warmup_steps=2", "train.target_loss=0",
       "train.checkpoint_every=4"]
[[axis]]
key = "experiment.seed"
values = [1]
)");
  const std::string db = dir.file("one.db");
  const std::filesystem::path checkpoints = db + "-checkpoints/run-1";
  {
    lrmoe_test::ChildProcess child({LRMOE_BINARY, "sweep", sweep.string(), "--db", db},
                                   dir.file("first.log"));
    for (int i = 0; i < 3000 && !lrmoe::latest_checkpoint(checkpoints); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(lrmoe::latest_checkpoint(checkpoints));
    // The machine goes away: the cell's process and the sweep's die at once.
    const pid_t cell = static_cast<pid_t>(std::stoll(
        lrmoe_test::scalar(*lrmoe::ResultsStore::open_read_only(db), "SELECT pid FROM runs")));
    kill(cell, SIGKILL);
    child.signal(SIGKILL);
    child.wait(std::chrono::seconds(20));
    // SIGKILL is delivered asynchronously: wait (bounded) until the cell has exited.
    for (int i = 0; i < 500 && lrmoe::store::process_is_alive(cell, ""); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto [code, output] =
      run_lrmoe({"sweep", sweep.string(), "--db", db}, dir.file("second.log"));
  INFO(output);
  REQUIRE(code == 0);
  CHECK_THAT(output, Contains("1 cells, 0 finished before, 1 to run") &&
                         Contains("1 of them continue their interrupted run"));
  auto store = lrmoe::ResultsStore::open_read_only(db);
  CHECK(store->list_runs().size() == 1);
  CHECK(lrmoe_test::scalar(*store, "SELECT runs || ' ' || status FROM sweep_results") ==
        "1 finished");
  CHECK(lrmoe_test::scalar(*store, "SELECT count(*) || ' ' || max(step) FROM steps") == "200 200");
  CHECK(lrmoe_test::scalar(
            *store, "SELECT count(*) FROM events WHERE message LIKE 'resumed after step %'") ==
        "1");
  CHECK_FALSE(std::filesystem::exists(checkpoints));
}

TEST_CASE("every shipped sweep loads and every cell's experiment resolves", "[sweep]") {
  int sweeps = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(LRMOE_SOURCE_DIR) + "/experiments/sweeps")) {
    INFO(entry.path().string());
    const SweepSpec spec = lrmoe::load_sweep_spec(entry.path());
    CHECK_FALSE(spec.cells.empty());
    for (const lrmoe::SweepCell& cell : spec.cells) {
      INFO(cell.label());
      CHECK_NOTHROW(lrmoe::load_experiment(spec.experiment, spec.overrides(cell)));
    }
    ++sweeps;
  }
  CHECK(sweeps > 0);
}

TEST_CASE(
    "lrmoe compare --plot draws a sweep's figures as PNG and SVG, and with a baseline its "
    "reductions",
    "[sweep][compare][e2e]") {
  TempFolder dir;
  const auto sweep = dir.write("two.toml", "experiment = \"" + kTinyExperiment + "\"\n" + R"(
set = ["train.max_steps=4", "train.warmup_steps=1", "train.eval_every=2", "train.eval_batches=1",
       "cluster.ranks=2"]
[[axis]]
key = "policies.bundle"
values = ["fixed", "lrmoe"]
)");
  const std::string db = dir.file("two.db");
  REQUIRE(run_lrmoe({"sweep", sweep.string(), "--db", db}, dir.file("sweep.log")).first == 0);
  const auto figures = dir.path() / "figures";
  const auto [code, output] = run_lrmoe({"compare", "--sweep", "two", "--db", db, "--baseline",
                                         "bundle=fixed", "--plot", figures.string()},
                                        dir.file("compare.log"));
  INFO(output);
  REQUIRE(code == 0);
  for (const std::string name :
       {"tiny-moe-loss-vs-moe-time", "tiny-moe-memory", "tiny-moe-rank-load", "two-reductions"}) {
    for (const std::string suffix : {".png", ".svg"}) {
      const auto file = figures / (name + suffix);
      INFO(file.string());
      CHECK(std::filesystem::file_size(file) > 1000);
    }
  }
}

TEST_CASE(
    "a sweep's cells train the experiment resolved when it started, and a cell whose run trained "
    "another runs again",
    "[sweep][e2e]") {
  TempFolder dir;
  const auto base = dir.write("base.toml", "extends = \"" + kTinyExperiment + "\"\n" + R"(
[train]
max_steps = 3
warmup_steps = 1
eval_every = 3
eval_batches = 1
)");
  const auto sweep = dir.write("resolved.toml", R"(experiment = "base.toml"
[[axis]]
key = "policies.bundle"
values = ["fixed", "lrmoe"]
)");
  const std::string db = dir.file("resolved.db");
  auto [code, output] = run_lrmoe({"sweep", sweep.string(), "--db", db}, dir.file("first.log"));
  INFO(output);
  REQUIRE(code == 0);
  // Each cell ran from its resolved experiment, written beside its log.
  const std::string cell_file = dir.file("resolved-sweeps/resolved/cell-1.toml");
  REQUIRE(std::filesystem::exists(cell_file));
  CHECK(lrmoe::experiment_identity(lrmoe::load_experiment(cell_file, {})) ==
        lrmoe::experiment_identity(lrmoe::load_experiment(base, {"policies.bundle=\"lrmoe\""})));
  // Each run recorded the identity of what it trained: its cell's.
  CHECK(lrmoe_test::scalar(*lrmoe::ResultsStore::open_read_only(db),
                           "SELECT count(*) FROM sweep_runs WHERE experiment_sha256 = "
                           "(SELECT experiment_sha256 FROM sweep_cells c WHERE "
                           "c.cell = sweep_runs.cell)") == "2");
  {
    // Cell 1's run as if it had trained something else (an older build read an edited base).
    lrmoe_test::ChildProcess edit(
        {"/usr/bin/sqlite3", db,
         "UPDATE sweep_runs SET experiment_sha256 = 'other' WHERE cell = 1"},
        dir.file("edit.log"));
    REQUIRE(edit.wait(std::chrono::seconds(30)) == 0);
  }
  std::tie(code, output) = run_lrmoe({"sweep", sweep.string(), "--db", db}, dir.file("second.log"));
  INFO(output);
  REQUIRE(code == 0);
  CHECK_THAT(output, Contains("cell 1 (run 2) trained an experiment other than the cell's "
                              "recorded one, and run again"));
  CHECK_THAT(output, Contains("2 cells, 1 finished before, 1 to run"));
}

TEST_CASE(
    "a sweep's name names no folder outside its own, and a replay never records into a "
    "training sweep",
    "[sweep][e2e]") {
  TempFolder dir;
  CHECK_THAT(config_error_of(dir,
                             "name = \"out/side\"\nexperiment = \"b.toml\"\n[[axis]]\n"
                             "key = \"a.b\"\nvalues = [1]\n"),
             Contains("sweep.toml:1:8: a sweep's name must not hold a path separator"));
  CHECK_THAT(config_error_of(dir,
                             "name = \"\"\nexperiment = \"b.toml\"\n[[axis]]\n"
                             "key = \"a.b\"\nvalues = [1]\n"),
             Contains("a sweep's name must not be empty"));

  const std::string db = dir.file("kinds.db");
  const auto sweep = dir.write("taken.toml", "experiment = \"" + kTinyExperiment + "\"\n" + R"(
set = ["train.max_steps=2", "train.warmup_steps=1"]
[[axis]]
key = "experiment.seed"
values = [1]
)");
  const auto [trained, trained_output] =
      run_lrmoe({"sweep", sweep.string(), "--db", db}, dir.file("sweep.log"));
  INFO(trained_output);
  REQUIRE(trained == 0);
  const std::vector<std::string> replay{"replay", kTinyExperiment, "--skew", "zipf:1.0", "--steps",
                                        "2",      "--db",          db,       "--record"};
  auto with = [&](const std::string& name) {
    std::vector<std::string> args = replay;
    args.push_back(name);
    return args;
  };
  const auto [into, into_output] = run_lrmoe(with("taken"), dir.file("into.log"));
  CHECK(into == 1);
  CHECK_THAT(into_output, Contains("holds a training sweep named 'taken'; a replay cannot be "
                                   "recorded into it: give it another name"));
  const auto [empty, empty_output] = run_lrmoe(with(""), dir.file("empty.log"));
  CHECK(empty == 1);
  CHECK_THAT(empty_output, Contains("replay: --record '': a sweep's name must not be empty"));
  CHECK(lrmoe_test::scalar(*lrmoe::ResultsStore::open_read_only(db),
                           "SELECT count(*) FROM sweeps") == "1");
}
