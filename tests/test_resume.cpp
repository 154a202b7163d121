// Exact resume (Note [Checkpoints]): a trainer resumed from a checkpoint trains on as the
// uninterrupted one did, bit for bit, with the pipelines' history and the policies' own state;
// checkpoint files are written atomically, pruned, and refused when they are not the run's; and
// `lrmoe resume` continues killed and stopped runs, on one process and on two, in the same rows.

#include <catch2/catch.hpp>

#include <sys/resource.h>

#include <fmt/format.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/config/model_presets.hpp"
#include "core/data/token_source.hpp"
#include "core/system/sha256.hpp"
#include "core/train/checkpoint.hpp"
#include "core/train/checkpoint_archive.hpp"
#include "core/train/trainer.hpp"
#include "lrmoe/static_owners.hpp"
#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/recording_observer.hpp"
#include "support/scripted_policies.hpp"
#include "support/store_samples.hpp"
#include "support/temp_folder.hpp"
#include "support/tiny_training.hpp"

using Catch::Matchers::Contains;
using lrmoe_test::kTinyExperiment;
using lrmoe_test::run_lrmoe;
using lrmoe_test::scalar;
using lrmoe_test::TempFolder;
using namespace lrmoe;
namespace fs = std::filesystem;

namespace {

const CheckpointIdentity kIdentity{"experiment-sha", "code-version"};

Experiment tiny_experiment() {
  Experiment e = lrmoe_test::tiny_training(5);
  e.train.max_steps = 6;
  e.train.checkpoint_every = 3;
  e.cluster.ranks = 2;
  e.cluster.slots_per_rank = 5;
  return e;
}

// A placement whose plan depends on its own state (the passes it has planned) and on the
// pipeline's history (the previous pass's counts): static owners, and a quota that halves the
// previous counts on odd passes. A resume that lost either would train differently.
struct CountingPlacement : PlacementPolicy {
  int64_t passes = 0;
  PlacementPlan plan(const PlacementRequest& request) override {
    PlacementPlan plan;
    plan.instances = static_owners(request.num_experts, request.ranks);
    plan.quota = request.counts;
    if (++passes % 2 == 1 && !request.history.empty()) {
      for (std::size_t e = 0; e < plan.quota.size(); ++e)
        plan.quota[e] = std::min(plan.quota[e], request.history.back()[e] / 2);
    }
    return plan;
  }
  std::vector<uint8_t> save_state() const override {
    std::vector<uint8_t> bytes(sizeof(passes));
    std::memcpy(bytes.data(), &passes, sizeof(passes));
    return bytes;
  }
  void restore_state(const std::vector<uint8_t>& state) override {
    REQUIRE(state.size() == sizeof(passes));
    std::memcpy(&passes, state.data(), sizeof(passes));
  }
};

std::shared_ptr<PolicySet> counting_policies() {
  auto set = lrmoe_test::scripted_policies([](const PlacementRequest&) { return PlacementPlan{}; });
  set->placement = std::make_shared<CountingPlacement>();
  // Keep the quota: each expert's highest-gate pairs up to it.
  lrmoe_test::selection_of(*set).decide = [](const PairBatch& pairs, const at::Tensor& scores) {
    return Selection{
        highest_scored_per_expert(scores, pairs.experts, pairs.expert_offsets, pairs.quota), {}};
  };
  return set;
}

using lrmoe_test::RecordingObserver;

std::vector<StepRecord> steps_of(const std::string& db, int64_t run) {
  return ResultsStore::open_read_only(db)->steps(run);
}

// Every recorded figure of training that does not depend on the clock, bit for bit.
void check_same_training(const std::vector<StepRecord>& a, const std::vector<StepRecord>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("step " << a[i].step);
    CHECK(a[i].step == b[i].step);
    CHECK(std::memcmp(&a[i].train_loss, &b[i].train_loss, sizeof(double)) == 0);
    CHECK(std::memcmp(&a[i].grad_norm, &b[i].grad_norm, sizeof(double)) == 0);
    CHECK(a[i].eval_loss == b[i].eval_loss);
    CHECK(a[i].tokens == b[i].tokens);
    CHECK(a[i].moe_modeled_seconds == b[i].moe_modeled_seconds);
  }
}

// Trains the tiny experiment with the counting placement to its end, writing checkpoints into
// `folder`.
RecordingObserver train_with_checkpoints(const Experiment& e, const TokenSource& data,
                                         const fs::path& folder) {
  Trainer whole(e, data, counting_policies());
  whole.enable_checkpoints(CheckpointSettings{folder, kIdentity});
  RecordingObserver losses;
  whole.run(losses);
  return losses;
}

// Waits (bounded) until `file` exists.
bool wait_for(const fs::path& file) {
  for (int i = 0; i < 3000 && !fs::exists(file); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return fs::exists(file);
}

// Waits (bounded) until `count_sql` counts one row in `db`, which a running process writes.
bool wait_for_one_row(const std::string& db, const std::string& count_sql) {
  for (int i = 0; i < 300; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    try {
      if (lrmoe_test::scalar(*ResultsStore::open_read_only(db), count_sql) == "1") return true;
    } catch (const lrmoe::StoreError&) {
      // busy: the process is writing
    }
  }
  return false;
}

}  // namespace

TEST_CASE(
    "a trainer resumed from a checkpoint trains on bit for bit, with the pipeline's history and "
    "its policies' own state",
    "[resume]") {
  TempFolder dir;
  const Experiment e = tiny_experiment();
  auto data = make_token_source(e.data, e.experiment.seed, e.train.seq_len);

  const RecordingObserver uninterrupted = train_with_checkpoints(e, *data, dir.path());
  REQUIRE(fs::exists(checkpoint_path(dir.path(), 3)));

  // Fresh policies (their pass count at zero) and a fresh model: all of it from the file.
  Trainer resumed(e, *data, counting_policies());
  CHECK(resumed.resume_from(checkpoint_path(dir.path(), 3), kIdentity) == 3);
  RecordingObserver rest;
  const TrainingOutcome outcome = resumed.run(rest);
  CHECK(rest.steps == std::vector<int64_t>{4, 5, 6});
  CHECK(rest.losses ==
        std::vector<double>(uninterrupted.losses.begin() + 3, uninterrupted.losses.end()));
  CHECK(rest.grad_norms ==
        std::vector<double>(uninterrupted.grad_norms.begin() + 3, uninterrupted.grad_norms.end()));
  CHECK(rest.kept ==
        std::vector<int64_t>(uninterrupted.kept.begin() + 3, uninterrupted.kept.end()));
  CHECK(outcome.steps == 6);
  CHECK(outcome.tokens == 6 * e.train.batch_size * e.train.seq_len);
  CHECK(outcome.final_eval_loss == uninterrupted.eval_losses.back());
  // The quota halving happened: the state was not a no-op.
  CHECK(*std::min_element(uninterrupted.kept.begin(), uninterrupted.kept.end()) <
        *std::max_element(uninterrupted.kept.begin(), uninterrupted.kept.end()));
}

TEST_CASE(
    "with sharded expert state the experts are saved in the process's part of the checkpoint, "
    "and a resume from both trains on bit for bit",
    "[resume]") {
  TempFolder dir;
  Experiment e = tiny_experiment();
  e.cluster.expert_state = ExpertState::Sharded;
  auto data = make_token_source(e.data, e.experiment.seed, e.train.seq_len);

  const RecordingObserver uninterrupted = train_with_checkpoints(e, *data, dir.path());
  REQUIRE(fs::exists(checkpoint_part_path(dir.path(), 3, 0)));

  Trainer resumed(e, *data, counting_policies());
  CHECK(resumed.resume_from(checkpoint_path(dir.path(), 3), kIdentity) == 3);
  RecordingObserver rest;
  resumed.run(rest);
  CHECK(rest.losses ==
        std::vector<double>(uninterrupted.losses.begin() + 3, uninterrupted.losses.end()));
  CHECK(rest.grad_norms ==
        std::vector<double>(uninterrupted.grad_norms.begin() + 3, uninterrupted.grad_norms.end()));

  // The experts are in the part only: without it the checkpoint is refused, saying so.
  fs::remove(checkpoint_part_path(dir.path(), 6, 0));
  Trainer other(e, *data, counting_policies());
  CHECK_THROWS_WITH(other.resume_from(checkpoint_path(dir.path(), 6), kIdentity),
                    Contains("this process's part of the checkpoint, step-00000006.process-0.pt, "
                             "is missing"));
  // A replicated run's checkpoint holds the experts in its main file, not a sharded run's.
  Experiment replicated = e;
  replicated.cluster.expert_state = ExpertState::Replicated;
  Trainer dense(replicated, *data, counting_policies());
  CHECK_THROWS_WITH(dense.resume_from(checkpoint_path(dir.path(), 3), kIdentity),
                    Contains("holds other tensors than this model's"));
}

TEST_CASE("a checkpoint of another experiment or build is refused with what differs", "[resume]") {
  TempFolder dir;
  const Experiment e = tiny_experiment();
  auto data = make_token_source(e.data, e.experiment.seed, e.train.seq_len);
  train_with_checkpoints(e, *data, dir.path());
  const fs::path file = checkpoint_path(dir.path(), 6);

  Trainer other(e, *data, counting_policies());
  CHECK_THROWS_WITH(other.resume_from(file, {"another-sha", kIdentity.code_version}),
                    Contains("this checkpoint is of another experiment (sha256 experiment-sha, "
                             "the run's is another-sha)"));
  CHECK_THROWS_WITH(other.resume_from(file, {kIdentity.experiment_sha256, "0.2.0"}),
                    Contains("was written by lrmoe code-version, this is 0.2.0"));
  // Resumed by another build (lrmoe resume --allow-changed-code): neither is checked.
  CHECK(other.resume_from(file, {}) == 6);
  // Not a checkpoint, though its checksum is right: LibTorch cannot read it.
  std::ofstream(dir.file("step-00000009.pt")) << "not a checkpoint";
  std::ofstream(dir.file("step-00000009.pt.sha256"))
      << sha256_hex("not a checkpoint") << "  step-00000009.pt\n";
  CHECK_THROWS_WITH(other.resume_from(dir.file("step-00000009.pt"), kIdentity),
                    Contains("cannot read this checkpoint"));
  // An archive without the keys a checkpoint has (found by fuzz_checkpoint_file: TorchScript
  // throws its own error type for a missing key).
  {
    torch::serialize::OutputArchive archive;
    archive.write("format", c10::IValue(kCheckpointFormat));
    write_atomically(dir.file("step-00000010.pt"),
                     [&](const ByteSink& sink) { archive.save_to(sink); });
  }
  CHECK_THROWS_WITH(
      other.resume_from(dir.file("step-00000010.pt"), kIdentity),
      Contains("step-00000010.pt: cannot read this checkpoint (") && Contains("experiment_sha256"));
  // Without its checksum, or with one that does not match, it is not read at all.
  fs::remove(dir.file("step-00000009.pt.sha256"));
  CHECK_THROWS_WITH(other.resume_from(dir.file("step-00000009.pt"), kIdentity),
                    Contains("has no readable checksum (step-00000009.pt.sha256) beside it"));
}

TEST_CASE("checkpoints are written whole or not at all, and only the newest are kept", "[resume]") {
  TempFolder dir;
  const fs::path folder = dir.path() / "run-1";
  CHECK_FALSE(latest_checkpoint(folder));
  CHECK_THROWS_WITH(write_atomically(checkpoint_path(folder, 4),
                                     [](const ByteSink& sink) {
                                       sink("half", 4);
                                       throw std::runtime_error("disk full");
                                     }),
                    Contains("cannot write checkpoint") && Contains("disk full"));
  CHECK(fs::is_empty(folder));
  for (int64_t step : {4, 8, 12}) {
    write_atomically(checkpoint_path(folder, step), [](const ByteSink& sink) { sink("whole", 5); });
  }
  std::ofstream(folder / "notes.txt") << "not a checkpoint";
  std::ofstream(folder / "step-00000010.pt.partial") << "a write cut short by SIGKILL";
  // Parts of each step's processes, and of step 16, whose main file was never written: a
  // checkpoint cut short, which is not one.
  for (int64_t step : {4, 8, 12, 16}) {
    for (int64_t process : {0, 1}) std::ofstream(checkpoint_part_path(folder, step, process));
  }
  CHECK(latest_checkpoint(folder) == checkpoint_path(folder, 12));
  prune_checkpoints(folder, 2);
  CHECK_FALSE(fs::exists(checkpoint_path(folder, 4)));
  CHECK_FALSE(fs::exists(checkpoint_part_path(folder, 4, 1)));
  CHECK(fs::exists(checkpoint_path(folder, 8)));
  CHECK(fs::exists(checkpoint_part_path(folder, 8, 0)));
  CHECK(fs::exists(checkpoint_part_path(folder, 12, 1)));
  CHECK_FALSE(fs::exists(checkpoint_part_path(folder, 16, 0)));
  CHECK_FALSE(fs::exists(folder / "step-00000010.pt.partial"));
  CHECK(fs::exists(folder / "notes.txt"));
  // A folder that exists but cannot be listed is said so, not taken for one without checkpoints.
  const fs::path loop = dir.path() / "run-2";
  fs::create_directory_symlink(loop, loop);
  CHECK_THROWS_WITH(latest_checkpoint(loop),
                    Contains("run-2: cannot list the run's checkpoints (") &&
                        Contains("make it a folder this user can read"));
}

TEST_CASE(
    "a checkpoint write the disk refuses throws one error, leaves no partial file and keeps the "
    "checkpoint before",
    "[resume]") {
  TempFolder dir;
  const fs::path folder = dir.path() / "run-1";
  // LibTorch's archive writer, which finishes the file in its destructor: a short write there
  // must become this error, not std::terminate.
  auto save = [](int64_t elements) {
    return [elements](const ByteSink& sink) {
      torch::serialize::OutputArchive archive;
      archive.write("weights", torch::ones({elements}));
      archive.save_to(sink);
    };
  };
  write_atomically(checkpoint_path(folder, 4), save(16));
  // A file-size limit refuses what a full disk would (EFBIG instead of ENOSPC), in this process
  // alone; SIGXFSZ ignored as the runner ignores it.
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &before) == 0);
  const auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = before;
  small.rlim_cur = 64 << 10;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string error;
  try {
    write_atomically(checkpoint_path(folder, 8), save(1 << 18));  // 1 MiB of fp32
  } catch (const CheckpointError& e) {
    error = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, previous_handler);
  CHECK_THAT(error, Contains("cannot write checkpoint") && Contains("step-00000008.pt.partial: ") &&
                        Contains(std::strerror(EFBIG)) && Contains("has room"));
  CHECK_FALSE(fs::exists(folder / "step-00000008.pt.partial"));
  CHECK_FALSE(fs::exists(checkpoint_path(folder, 8)));
  CHECK(latest_checkpoint(folder) == checkpoint_path(folder, 4));
  CHECK_NOTHROW(verify_checkpoint_file(checkpoint_path(folder, 4)));
}

TEST_CASE("a checkpoint whose checksum holds but that LibTorch cannot parse is refused in one line",
          "[resume]") {
  // Found by fuzz_checkpoint_file: TorchScript's parser throws its own error type, not a
  // c10::Error, for a type name it does not know.
  torch::serialize::OutputArchive archive;
  archive.write("weights", torch::ones({4}));
  std::ostringstream saved;
  archive.save_to(saved);
  std::string bytes = saved.str();
  const std::size_t type = bytes.find("__torch__\nModule");
  REQUIRE(type != std::string::npos);
  bytes[type + std::strlen("__torch__\n")] = 'N';  // "Nodule"
  TempFolder dir;
  const fs::path file = checkpoint_path(dir.path(), 1);
  write_atomically(file, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
  torch::serialize::InputArchive read;
  std::string error;
  try {
    load_verified(read, file, torch::kCPU);
  } catch (const CheckpointError& e) {
    error = e.what();
  }
  CHECK_THAT(error, Contains("step-00000001.pt: cannot read this checkpoint (") &&
                        Contains("resume from an earlier one"));
  CHECK(error.find('\n') == std::string::npos);
}

TEST_CASE("a run whose checkpoint cannot be written fails in one line and an error event",
          "[resume][e2e]") {
  TempFolder dir;
  const std::string db = dir.file("r.db");
  // 700 KiB per file (1400 blocks of 512 bytes): the database fits, with room beside the 400-500
  // KiB its schema takes; the tiny model's first checkpoint part (about 1.7 MB) does not.
  const std::string command = fmt::format(
      "ulimit -f 1400; exec {} run {} --db {} --set train.checkpoint_every=5 --set "
      "train.max_steps=20 --set train.target_loss=0",
      LRMOE_BINARY, kTinyExperiment, db);
  lrmoe_test::ChildProcess child({"/bin/sh", "-c", command}, dir.file("run.log"));
  const int code = child.wait(std::chrono::seconds(120));
  const std::string output = child.output();
  INFO(output);
  CHECK(code == 1);
  std::vector<std::string> errors;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("lrmoe: ", 0) == 0) errors.push_back(line);
  }
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors.front(), Contains("cannot write checkpoint") && Contains(std::strerror(EFBIG)));
  auto store = ResultsStore::open_read_only(db);
  CHECK(scalar(*store, "SELECT status FROM runs") == "failed");
  CHECK(scalar(*store,
               "SELECT count(*) FROM events WHERE level = 'error' AND message LIKE "
               "'cannot write checkpoint%'") == "1");
  for (const auto& entry : fs::directory_iterator(db + "-checkpoints/run-1"))
    CHECK(entry.path().extension() != ".partial");
}

TEST_CASE("lrmoe resume continues a killed run in its rows as if it had not stopped",
          "[resume][slow]") {
  TempFolder dir;
  const std::vector<std::string> settings{kTinyExperiment,
                                          "--set",
                                          "train.max_steps=12",
                                          "--set",
                                          "train.warmup_steps=2",
                                          "--set",
                                          "train.target_loss=0",
                                          "--set",
                                          "train.checkpoint_every=4",
                                          "--set",
                                          "cluster.ranks=4",
                                          "--set",
                                          "cluster.slots_per_rank=3",
                                          "--set",
                                          "policies.bundle=symi"};
  auto with = [&](std::vector<std::string> head, const std::string& db) {
    head.insert(head.end(), settings.begin(), settings.end());
    head.insert(head.end(), {"--db", db});
    return head;
  };
  const std::string whole_db = dir.file("whole.db"), cut_db = dir.file("cut.db");
  REQUIRE(run_lrmoe(with({"run"}, whole_db), dir.file("whole.log")).first == 0);

  {
    std::vector<std::string> args{LRMOE_BINARY};
    for (const std::string& a : with({"run"}, cut_db)) args.push_back(a);
    lrmoe_test::ChildProcess child(args, dir.file("cut.log"));
    REQUIRE(wait_for(checkpoint_path(cut_db + "-checkpoints/run-1", 8)));
    child.signal(SIGKILL);
    child.wait(std::chrono::seconds(20));
  }
  const auto [code, output] = run_lrmoe({"resume", "1", "--db", cut_db}, dir.file("resume.log"));
  INFO(output);
  REQUIRE(code == 0);
  check_same_training(steps_of(whole_db, 1), steps_of(cut_db, 1));
  const auto store = ResultsStore::open_read_only(cut_db);
  CHECK(scalar(*store, "SELECT status FROM runs") == "finished");
  CHECK(scalar(*store, "SELECT count(*) FROM events WHERE message LIKE 'resumed after step 8%'") ==
        "1");
  CHECK(scalar(*store, "SELECT count(*) FROM rank_memory WHERE run = 1") == "48");

  // A finished run, and a run without checkpoints, are not resumed; nothing is written.
  CHECK_THAT(run_lrmoe({"resume", "1", "--db", cut_db}, dir.file("again.log")).second,
             Contains("run 1 is finished: only a stopped, interrupted or failed run"));
}

TEST_CASE("a checkpoint that is not the run's is refused and the run's rows are kept",
          "[resume][slow]") {
  TempFolder dir;
  const std::string db = dir.file("r.db");
  auto arguments = [&](const std::string& seed, const std::string& steps,
                       const std::string& every) {
    return std::vector<std::string>{"run",   kTinyExperiment,
                                    "--set", "train.max_steps=" + steps,
                                    "--set", "train.warmup_steps=2",
                                    "--set", "train.target_loss=0",
                                    "--set", "train.checkpoint_every=" + every,
                                    "--set", "experiment.seed=" + seed,
                                    "--db",  db};
  };
  {
    // Run 1, of seed 1, is killed after its first checkpoint (a finished run removes its own).
    std::vector<std::string> args{LRMOE_BINARY};
    for (const std::string& a : arguments("1", "100000", "3")) args.push_back(a);
    lrmoe_test::ChildProcess child(args, dir.file("first.log"));
    REQUIRE(wait_for(checkpoint_path(db + "-checkpoints/run-1", 3)));
    child.signal(SIGKILL);
    child.wait(std::chrono::seconds(20));
  }
  REQUIRE(run_lrmoe(arguments("2", "6", "0"), dir.file("run.log")).first == 0);
  const auto store = ResultsStore::open(db);
  store->finish_run(2, "failed", std::nullopt);  // as if it had failed at its end
  CHECK_THAT(run_lrmoe({"resume", "2", "--db", db}, dir.file("none.log")).second,
             Contains("run 2 has no checkpoint in") && Contains("train.checkpoint_every > 0"));
  // Run 1's checkpoint, of seed 1, put where run 2's would be.
  fs::create_directories(db + "-checkpoints/run-2");
  const std::optional<fs::path> first = latest_checkpoint(db + "-checkpoints/run-1");
  REQUIRE(first);
  fs::copy_file(*first, db + "-checkpoints/run-2/" + first->filename().string());
  fs::copy_file(first->string() + ".sha256",
                db + "-checkpoints/run-2/" + first->filename().string() + ".sha256");
  const auto [code, output] = run_lrmoe({"resume", "2", "--db", db}, dir.file("other.log"));
  CHECK(code == 1);
  CHECK_THAT(output, Contains("this checkpoint is of another experiment"));
  CHECK(scalar(*store,
               "SELECT count(*) || ' ' || max(status) FROM steps JOIN runs ON id = run "
               "WHERE run = 2") == "6 failed");
}

TEST_CASE("lrmoe resume continues a stopped two-process run as if it had not stopped",
          "[resume][slow]") {
  const std::string state = GENERATE("replicated", "sharded");
  INFO("cluster.expert_state " << state);
  TempFolder dir;
  const std::vector<std::string> settings{
      kTinyExperiment,        "--set", "cluster.expert_state=" + state, "--set",
      "train.max_steps=14",   "--set", "train.warmup_steps=2",          "--set",
      "train.target_loss=0",  "--set", "train.checkpoint_every=5",      "--set",
      "cluster.ranks=4",      "--set", "cluster.slots_per_rank=3",      "--set",
      "policies.bundle=lrmoe"};
  auto launch = [&](const std::string& db) {
    std::vector<std::string> args{"launch", "-n", "2"};
    args.insert(args.end(), settings.begin(), settings.end());
    args.insert(args.end(), {"--db", db});
    return args;
  };
  const std::string whole_db = dir.file("whole.db"), cut_db = dir.file("cut.db");
  REQUIRE(run_lrmoe(launch(whole_db), dir.file("whole.log")).first == 0);
  {
    std::vector<std::string> args{LRMOE_BINARY};
    for (const std::string& a : launch(cut_db)) args.push_back(a);
    lrmoe_test::ChildProcess child(args, dir.file("cut.log"));
    REQUIRE(wait_for(checkpoint_path(cut_db + "-checkpoints/run-1", 5)));
    child.signal(SIGINT);
    CHECK(child.wait(std::chrono::seconds(60)) == 130);
    // The stopped run's summary says how to go on.
    CHECK_THAT(child.output(), Contains("resume with         lrmoe resume 1 --db " + cut_db));
  }
  CHECK(scalar(*ResultsStore::open_read_only(cut_db), "SELECT status FROM runs") == "stopped");
  const fs::path folder = cut_db + "-checkpoints/run-1";
  if (state == "sharded") {
    // Each process wrote its own experts; they are not resharded over another count.
    const std::optional<fs::path> latest = latest_checkpoint(folder);
    REQUIRE(latest);
    CHECK(fs::exists(latest->parent_path() / (latest->stem().string() + ".process-1.pt")));
    std::vector<std::string> one{"run"};
    one.insert(one.end(), settings.begin(), settings.end());
    one.insert(one.end(),
               {"--db", cut_db, "--resume-run", "1", "--resume-checkpoint", latest->string()});
    const auto [refused, says] = run_lrmoe(one, dir.file("one.log"));
    CHECK(refused == 1);
    CHECK_THAT(says, Contains("written by 2 processes, each holding its own experts, and this "
                              "run has 1"));
  }
  const auto [code, output] = run_lrmoe({"resume", "1", "--db", cut_db}, dir.file("resume.log"));
  INFO(output);
  REQUIRE(code == 0);
  check_same_training(steps_of(whole_db, 1), steps_of(cut_db, 1));
  CHECK(scalar(*ResultsStore::open_read_only(cut_db), "SELECT processes FROM runs") == "2");
}

TEST_CASE(
    "resume refuses a plugin library or a build other than the run's, unless told, and records it",
    "[resume][slow]") {
  TempFolder dir;
  const std::string db = dir.file("r.db");
  {
    std::vector<std::string> args{LRMOE_BINARY,
                                  "run",
                                  kTinyExperiment,
                                  "--set",
                                  "train.max_steps=100000",
                                  "--set",
                                  "train.target_loss=0",
                                  "--set",
                                  "train.checkpoint_every=3",
                                  "--db",
                                  db};
    lrmoe_test::ChildProcess child(args, dir.file("first.log"));
    REQUIRE(wait_for(checkpoint_path(db + "-checkpoints/run-1", 3)));
    child.signal(SIGKILL);
    child.wait(std::chrono::seconds(20));
  }
  {
    // As if the placement's library had been rebuilt from other code since the run began.
    lrmoe_test::ChildProcess edit(
        {"/usr/bin/sqlite3", db,
         "UPDATE run_plugins SET sha256 = 'feedfacefeedface' WHERE kind = 'placement'"},
        dir.file("edit.log"));
    REQUIRE(edit.wait(std::chrono::seconds(30)) == 0);
  }
  const auto [refused, refused_output] =
      run_lrmoe({"resume", "1", "--db", db}, dir.file("refused.log"));
  CHECK(refused == 1);
  CHECK_THAT(refused_output, Contains("run 1's placement plugin 'fixed_ownership'") &&
                                 Contains("recorded feedfacefeed") &&
                                 Contains("--allow-changed-plugins"));
  CHECK(scalar(*ResultsStore::open_read_only(db), "SELECT status FROM runs") == "interrupted");

  // Told, it resumes, the changed library recorded as an event; then it is stopped.
  const std::string warned =
      "SELECT count(*) FROM events WHERE level = 'warning' AND message LIKE "
      "'resumed with a changed library: placement plugin ''fixed_ownership''%'";
  std::vector<std::string> args{LRMOE_BINARY, "resume", "1", "--db", db, "--allow-changed-plugins"};
  lrmoe_test::ChildProcess child(args, dir.file("allowed.log"));
  const bool recorded = wait_for_one_row(db, warned);
  child.signal(SIGINT);
  child.wait(std::chrono::seconds(60));
  INFO(child.output());
  CHECK(recorded);

  // The same for the build: as if another build had trained the run.
  {
    lrmoe_test::ChildProcess edit(
        {"/usr/bin/sqlite3", db, "UPDATE runs SET code_version = '0.0.1-elsewhere'"},
        dir.file("edit-code.log"));
    REQUIRE(edit.wait(std::chrono::seconds(30)) == 0);
  }
  const auto [other_build, other_build_output] = run_lrmoe(
      {"resume", "1", "--db", db, "--allow-changed-plugins"}, dir.file("other-build.log"));
  CHECK(other_build == 1);
  CHECK_THAT(other_build_output, Contains("run 1 was trained by lrmoe 0.0.1-elsewhere") &&
                                     Contains("--allow-changed-code"));
  std::vector<std::string> both{
      LRMOE_BINARY, "resume", "1", "--db", db, "--allow-changed-plugins", "--allow-changed-code"};
  lrmoe_test::ChildProcess resumed(both, dir.file("other-build-allowed.log"));
  const bool code_recorded = wait_for_one_row(
      db,
      "SELECT count(*) FROM events WHERE level = 'warning' AND message LIKE 'resumed by lrmoe % "
      "not the build that trained the run (0.0.1-elsewhere)'");
  resumed.signal(SIGINT);
  resumed.wait(std::chrono::seconds(60));
  INFO(resumed.output());
  CHECK(code_recorded);
}

TEST_CASE(
    "a damaged checkpoint is found by its checksum: resume falls back to the one before, saying "
    "so, and refuses when none verifies",
    "[resume][slow]") {
  TempFolder dir;
  const std::string db = dir.file("r.db");
  const std::vector<std::string> settings{"--set", "train.max_steps=100000",
                                          "--set", "train.target_loss=0",
                                          "--set", "train.checkpoint_every=3",
                                          "--set", "train.checkpoint_keep=2",
                                          "--db",  db};
  {
    std::vector<std::string> args{LRMOE_BINARY, "run", kTinyExperiment};
    args.insert(args.end(), settings.begin(), settings.end());
    lrmoe_test::ChildProcess child(args, dir.file("first.log"));
    REQUIRE(wait_for(checkpoint_path(db + "-checkpoints/run-1", 6)));
    child.signal(SIGKILL);
    child.wait(std::chrono::seconds(20));
  }
  // 64 bytes in the middle of the newest checkpoint (step 6, or later if the run got further).
  const std::optional<fs::path> newest = latest_checkpoint(db + "-checkpoints/run-1");
  REQUIRE(newest);
  {
    std::fstream file(*newest, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(fs::file_size(*newest) / 2));
    const std::string garbage(64, '\x5a');
    file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  std::vector<std::string> skipped;
  const std::optional<fs::path> verified =
      latest_verified_checkpoint(db + "-checkpoints/run-1", skipped);
  REQUIRE(verified);
  CHECK(*verified != *newest);
  REQUIRE(skipped.size() == 1);
  CHECK_THAT(skipped.front(), Contains(newest->string() + ": damaged: its SHA-256 is"));

  // Resumed, the run goes on from the checkpoint before, says so and records it; stopped again.
  lrmoe_test::ChildProcess resumed({LRMOE_BINARY, "resume", "1", "--db", db},
                                   dir.file("resume.log"));
  const std::string noted_event =
      "SELECT count(*) FROM events WHERE level = 'warning' AND message LIKE 'skipped: %damaged%'";
  const bool noted = wait_for_one_row(db, noted_event);
  resumed.signal(SIGKILL);
  resumed.wait(std::chrono::seconds(20));
  INFO(resumed.output());
  CHECK(noted);
  CHECK_THAT(resumed.output(), Contains("resuming from " + verified->filename().string()));

  // With every checkpoint damaged, nothing is resumed.
  for (const fs::directory_entry& entry : fs::directory_iterator(db + "-checkpoints/run-1")) {
    if (entry.path().extension() != ".sha256") continue;
    std::ofstream(entry.path()) << std::string(64, '0') << "  x\n";
  }
  const auto [refused, refused_output] =
      run_lrmoe({"resume", "1", "--db", db}, dir.file("refused.log"));
  CHECK(refused == 1);
  CHECK_THAT(refused_output, Contains("run 1: no checkpoint verifies:"));
}
