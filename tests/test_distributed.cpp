// Expert parallelism over real processes (c10d Gloo on 127.0.0.1): the collectives, one run on
// P = 1, 2 and 4 processes giving the same losses and one set of database rows (Note [Exact
// multi-process plan] in docs/notes.md), with experts replicated or sharded, every bundle reaching
// its target on two processes, and a rank that dies or hangs ending the run as failed with its
// committed steps.

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/distributed/collectives.hpp"
#include "store/results_store.hpp"
#include "support/child_process.hpp"
#include "support/in_processes.hpp"
#include "support/network.hpp"
#include "support/run_database.hpp"
#include "support/temp_folder.hpp"

using lrmoe::Collectives;
using lrmoe_test::ChildProcess;
using lrmoe_test::in_processes;
using lrmoe_test::kTinyExperiment;
using lrmoe_test::run_lrmoe;
using lrmoe_test::ScopedEnvironment;
using lrmoe_test::TempFolder;

namespace {

bool same(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.equal(b);
}

std::vector<std::string> tiny_settings(int64_t ranks, int64_t slots, const std::string& bundle) {
  return {"--set", "cluster.ranks=" + std::to_string(ranks),
          "--set", "cluster.slots_per_rank=" + std::to_string(slots),
          "--set", "policies.bundle=" + bundle};
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

std::string column(const std::string& db, const std::string& sql) {
  const lrmoe::QueryResult result = lrmoe::ResultsStore::open_read_only(db)->query(sql);
  std::string text;
  for (const auto& row : result.rows) {
    for (const auto& cell : row) text += cell.value_or("NULL") + " ";
    text += "\n";
  }
  return text;
}

std::vector<double> doubles(const std::string& db, const std::string& sql) {
  const lrmoe::QueryResult result = lrmoe::ResultsStore::open_read_only(db)->query(sql);
  std::vector<double> values;
  for (const auto& row : result.rows) values.push_back(std::stod(row.at(0).value()));
  return values;
}

// The process of this test run's launch (marked by `marker` in its environment) with RANK=rank.
pid_t launched_rank(const std::string& marker, int rank) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "environ", std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    const std::string nul(1, '\0');
    const std::string environ = nul + text.str();
    if (environ.find(nul + marker + nul) != std::string::npos &&
        environ.find(nul + "RANK=" + std::to_string(rank) + nul) != std::string::npos) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return -1;
}

}  // namespace

TEST_CASE("collectives: sums, gathers uneven rows, and all-to-all-v with empty sends and receives",
          "[distributed]") {
  // Process p holds p rows; process 0 sends and receives nothing.
  const std::vector<int> codes = in_processes(3, [](Collectives& c) {
    const int64_t me = c.rank();
    bool ok = c.size() == 3;
    torch::Tensor total = torch::tensor({static_cast<double>(me + 1)}, torch::kFloat64);
    c.sum(total);
    ok = ok && total.item<double>() == 6.0;
    torch::Tensor largest = torch::tensor({me * 10}, torch::kInt64);
    c.max(largest);
    ok = ok && largest.item<int64_t>() == 20;

    std::vector<int64_t> counts;
    const torch::Tensor mine = torch::full({me, 2}, static_cast<float>(me));
    const torch::Tensor all = c.gather_rows(mine, &counts);
    ok = ok && counts == std::vector<int64_t>{0, 1, 2} &&
         same(all, torch::tensor({1.0F, 1.0F, 2.0F, 2.0F, 2.0F, 2.0F}).reshape({3, 2})) &&
         same(c.gather_rows(mine, counts), all);  // the counts known up front: one collective

    // Processes 1 and 2 swap rows (bfloat16, to check rows travel as bytes); 0 is left out.
    const std::vector<int64_t> send = me == 0   ? std::vector<int64_t>{0, 0, 0}
                                      : me == 1 ? std::vector<int64_t>{0, 1, 2}
                                                : std::vector<int64_t>{0, 3, 0};
    const std::vector<int64_t> recv = me == 0   ? std::vector<int64_t>{0, 0, 0}
                                      : me == 1 ? std::vector<int64_t>{0, 1, 3}
                                                : std::vector<int64_t>{0, 2, 0};
    const int64_t rows = send[1] + send[2];
    const torch::Tensor out =
        torch::arange(rows * 3).reshape({rows, 3}).add(100 * me).to(torch::kBFloat16);
    const torch::Tensor in = c.exchange_rows(out, send, recv);
    torch::Tensor expected;
    if (me == 0) expected = torch::empty({0, 3}, torch::kBFloat16);
    if (me == 1) {
      expected = torch::cat({torch::arange(3).add(100), torch::arange(9).add(200)})
                     .reshape({4, 3})
                     .to(torch::kBFloat16);
    }
    if (me == 2) expected = torch::arange(3, 9).add(100).reshape({2, 3}).to(torch::kBFloat16);
    ok = ok && same(in, expected);
    c.barrier();
    return ok;
  });
  CHECK(codes == std::vector<int>{0, 0, 0});
}

TEST_CASE("one run on P = 1, 2 and 4 processes: the same losses and one set of rows",
          "[distributed][slow]") {
  struct Variant {
    std::string name;
    std::vector<std::string> settings;
    bool scalable =
        false;  // P = 2 and 4 plan from counts (Note [Scalable planning]), P = 1 exactly
  };
  const std::vector<std::string> replicated{"--set", "cluster.expert_state=replicated"};
  // Each process holding only its home experts and fetching the others it computes
  // (docs/ARCHITECTURE.md, "Expert-sharded state"; SYMI's owners leave their homes):
  // keep_all (fixed), deterministic quota top-k with replicas and capacity-aware routing
  // (lrmoe), lrmoe with recomputation and exact input gradients for dropped pairs, and with its
  // fetch waited for before the dispatch; SYMI's second layer fetched behind its first, and not;
  // lrmoe and SYMI (forward capacity, round-robin routing) with the scalable plan. Then every
  // process holding every expert (the replicated variant).
  const std::vector<Variant> variants{
      {"fixed", tiny_settings(4, 3, "fixed")},
      {"symi", tiny_settings(4, 3, "symi")},
      {"symi, fetch and gradient return not overlapped",
       with(tiny_settings(4, 3, "symi"), {"--set", "cluster.overlap_expert_fetch=false", "--set",
                                          "cluster.overlap_gradient_return=false"})},
      {"lrmoe", tiny_settings(4, 3, "lrmoe")},
      {"lrmoe, recompute, input_grad",
       with(tiny_settings(4, 3, "lrmoe"), {"--set", "policies.recompute=true", "--set",
                                           "policies.dropped_pair_keeps=input_grad"})},
      {"lrmoe, fetch and gradient return not overlapped",
       with(tiny_settings(4, 3, "lrmoe"), {"--set", "cluster.overlap_expert_fetch=false", "--set",
                                           "cluster.overlap_gradient_return=false"})},
      {"lrmoe, scalable plan", tiny_settings(4, 3, "lrmoe"), true},
      // Draws keyed by pair id (symi drops at random too): the same pairs on any P.
      {"lrmoe, random metric, scalable plan",
       with(tiny_settings(4, 3, "lrmoe"), {"--set", "policies.metric.name=random"}), true},
      {"symi, recompute, scalable plan",
       with(tiny_settings(4, 3, "symi"), {"--set", "policies.recompute=true"}), true},
      {"fixed, replicated experts", with(tiny_settings(4, 3, "fixed"), replicated)},
      {"lrmoe, replicated experts", with(tiny_settings(4, 3, "lrmoe"), replicated)},
      {"lrmoe, replicated experts, scalable plan", with(tiny_settings(4, 3, "lrmoe"), replicated),
       true},
  };
  const std::vector<std::string> steps{"--set", "train.max_steps=12", "--set", "train.eval_every=6",
                                       "--set", "train.target_loss=0"};
  for (const Variant& variant : variants) {
    DYNAMIC_SECTION(variant.name) {
      TempFolder dir;
      std::map<int, std::string> db;
      for (int processes : {1, 2, 4}) {
        db[processes] = dir.file("p" + std::to_string(processes) + ".db");
        const std::vector<std::string> command =
            processes == 1 ? std::vector<std::string>{"run", kTinyExperiment}
                           : std::vector<std::string>{"launch", "-n", std::to_string(processes),
                                                      kTinyExperiment};
        std::vector<std::string> planning;
        if (variant.scalable && processes > 1) planning = {"--set", "policies.planning=scalable"};
        auto [code, output] = run_lrmoe(
            with(with(with(with(command, variant.settings), planning), steps),
                 {"--db", db[processes]}),
            dir.file("p" + std::to_string(processes) + ".log"), std::chrono::seconds(240));
        INFO(output);
        REQUIRE(code == 0);
      }
      const std::string losses = "SELECT train_loss FROM steps ORDER BY step";
      const std::string evals =
          "SELECT eval_loss FROM steps WHERE eval_loss IS NOT NULL ORDER BY step";
      for (int processes : {2, 4}) {
        INFO(processes << " processes");
        const std::vector<double> one = doubles(db[1], losses),
                                  many = doubles(db[processes], losses);
        REQUIRE(one.size() == 12);
        REQUIRE(many.size() == one.size());
        for (std::size_t i = 0; i < one.size(); ++i) CHECK(many[i] == Approx(one[i]).epsilon(1e-4));
        const std::vector<double> eval_one = doubles(db[1], evals),
                                  eval_many = doubles(db[processes], evals);
        REQUIRE(eval_many.size() == 2);
        for (std::size_t i = 0; i < eval_one.size(); ++i)
          CHECK(eval_many[i] == Approx(eval_one[i]).epsilon(1e-4));

        // One run, one set of rows, whatever P; the plan (and so what it moves) is the same.
        const std::string& d = db[processes];
        CHECK(column(d, "SELECT count(*), max(processes), max(ranks) FROM runs") ==
              "1 " + std::to_string(processes) + " 4 \n");
        CHECK(column(d, "SELECT count(*) FROM moe_layer_steps") ==
              column(db[1], "SELECT count(*) FROM moe_layer_steps"));
        const std::string planned =
            "SELECT step, layer, rank, forward_pairs, backward_pairs, bytes_sent, bytes_received "
            "FROM rank_layer_steps "
            "ORDER BY step, layer, rank";
        CHECK(column(d, planned) == column(db[1], planned));
        // 12 steps x 2 layers x 4 ranks
        CHECK(column(d, "SELECT count(*) FROM rank_layer_steps") == "96 \n");
        CHECK(column(d, "SELECT count(*), count(DISTINCT process) FROM process_layer_steps") ==
              std::to_string(24 * processes) + " " + std::to_string(processes) + " \n");
        // Pairs crossed processes, and the measured bytes are those of the rows that did.
        CHECK(doubles(d, "SELECT sum(measured_exchange_bytes) FROM moe_layer_steps")[0] > 0);
        CHECK(column(d, "SELECT sum(bytes_sent) = sum(bytes_received) FROM process_layer_steps") ==
              "1 \n");
        CHECK(doubles(d, "SELECT min(exchange_seconds) FROM process_layer_steps")[0] > 0);
        // Every process makes four all-to-all-v calls per layer and pass, whatever moves:
        // dispatch, combine, one backward dispatch (Note [Fused dispatch]) and return.
        CHECK(column(d,
                     "SELECT min(exchange_calls), max(exchange_calls) "
                     "FROM process_layer_steps") == "4 4 \n");
        // The experts fetched and their gradients returned: none when every process holds
        // every expert; sharded, with one rank per process, exactly the cost model's parameter
        // transfers, and with two ranks per process no more (its ranks share what they fetch).
        const bool sharded = std::find(variant.settings.begin(), variant.settings.end(),
                                       "cluster.expert_state=replicated") == variant.settings.end();
        const double measured =
            doubles(d, "SELECT sum(measured_parameter_bytes) FROM moe_layer_steps")[0];
        const double modeled = doubles(d, "SELECT sum(bytes_replica_sync) FROM moe_layer_steps")[0];
        if (!sharded) {
          CHECK(measured == 0);
        } else if (processes == 4) {
          CHECK(measured == modeled);
        } else {
          CHECK(measured <= modeled);
        }
        if (sharded && variant.name.rfind("fixed", 0) != 0) CHECK(measured > 0);
        // A process is blocked in its transfers at most as long as they take from start to
        // arrival (less where the fetch travelled during the dispatch).
        CHECK(column(d,
                     "SELECT count(*) FROM process_layer_steps WHERE parameter_blocked_seconds < 0 "
                     "OR parameter_blocked_seconds > parameter_seconds") == "0 \n");
        if (sharded && processes == 4) {
          CHECK(doubles(d, "SELECT sum(parameter_blocked_seconds) FROM process_layer_steps")[0] >
                0);
        }
        // Each process's holding: sharded, 1/P of the experts each (tiny-moe's 8 experts divide
        // evenly), every dense parameter everywhere; replicated, the whole model everywhere.
        const double experts = doubles(db[1], "SELECT expert_parameters FROM process_state")[0];
        const double dense = doubles(db[1], "SELECT dense_parameters FROM process_state")[0];
        const double held = sharded ? experts / processes : experts;
        CHECK(column(d,
                     "SELECT count(*), min(expert_parameters), max(expert_parameters), "
                     "min(dense_parameters), max(dense_parameters), "
                     "min(optimizer_bytes = 8 * (dense_parameters + expert_parameters)) "
                     "FROM process_state") == fmt::format("{0} {1} {1} {2} {2} 1 \n", processes,
                                                          static_cast<int64_t>(held),
                                                          static_cast<int64_t>(dense)));
      }
      CHECK(column(db[1], "SELECT count(*), sum(measured_exchange_bytes) FROM moe_layer_steps") ==
            "24 0 \n");
      CHECK(column(db[1], "SELECT count(*) FROM process_layer_steps") == "0 \n");
    }
  }
}

TEST_CASE("chunked exchanges train exactly as unchunked ones, overlapped and modeled so",
          "[distributed]") {
  // Every instance is in one chunk, and the chunks' rows are put together before they are
  // added, so the sums are the same (Note [Chunked exchange]). The replicas' gradients return
  // within their layer, so that the only modeled overlap is the chunks'.
  const std::vector<std::string> returned{"--set", "cluster.overlap_gradient_return=false"};
  struct Variant {
    std::string name;
    std::vector<std::string> settings;
    int processes = 2;
  };
  const std::vector<Variant> variants{
      {"lrmoe", with(tiny_settings(4, 3, "lrmoe"), returned)},
      {"lrmoe, recompute, input_grad", with(with(tiny_settings(4, 3, "lrmoe"), returned),
                                            {"--set", "policies.recompute=true", "--set",
                                             "policies.dropped_pair_keeps=input_grad"})},
      // The scalable plan splits its own slices and context move alike, on one process too
      // (where the context move sends nothing).
      {"lrmoe, scalable plan",
       with(with(tiny_settings(4, 3, "lrmoe"), returned), {"--set", "policies.planning=scalable"})},
      {"lrmoe, scalable plan, one process",
       with(with(tiny_settings(4, 3, "lrmoe"), returned), {"--set", "policies.planning=scalable"}),
       1},
      // SYMI's replicas are fetched within their layer too (Note [Overlapped expert fetch]).
      {"symi, recompute, scalable plan",
       with(with(tiny_settings(4, 3, "symi"), returned),
            {"--set", "policies.recompute=true", "--set", "policies.planning=scalable", "--set",
             "cluster.overlap_expert_fetch=false"})},
      // Fixed ownership keeps every pair on its one instance: the saved pre-activations stay
      // in place, chunk by chunk (Note [Context in place]).
      {"fixed, scalable plan",
       with(with(tiny_settings(4, 3, "fixed"), returned), {"--set", "policies.planning=scalable"})},
      {"fixed, scalable plan, one process",
       with(with(tiny_settings(4, 3, "fixed"), returned), {"--set", "policies.planning=scalable"}),
       1},
  };
  for (const Variant& variant : variants) {
    DYNAMIC_SECTION(variant.name) {
      TempFolder dir;
      std::map<int, std::string> db;
      for (const int chunks : {1, 3}) {
        db[chunks] = dir.file("c" + std::to_string(chunks) + ".db");
        auto [code, output] = run_lrmoe(
            with(with({"launch", "-n", std::to_string(variant.processes), kTinyExperiment},
                      variant.settings),
                 {"--set", "train.max_steps=4", "--set", "train.target_loss=0", "--set",
                  "cluster.exchange_chunks=" + std::to_string(chunks), "--db", db[chunks]}),
            dir.file("c" + std::to_string(chunks) + ".log"), std::chrono::seconds(240));
        INFO(output);
        REQUIRE(code == 0);
      }
      const std::string losses = "SELECT train_loss FROM steps ORDER BY step";
      REQUIRE(doubles(db[1], losses).size() == 4);
      CHECK(doubles(db[3], losses) == doubles(db[1], losses));
      // Four calls per chunk: dispatch, combine, backward dispatch and return (one process
      // records no exchange).
      if (variant.processes > 1) {
        CHECK(column(db[3],
                     "SELECT min(exchange_calls), max(exchange_calls) "
                     "FROM process_layer_steps") == "12 12 \n");
      }
      // The same plan, bytes and compute; the all-to-all in three calls per call, and some of
      // it hidden behind the chunks' compute (none in a pass whose later chunks move nothing).
      const std::string plan =
          "SELECT forward_pairs, backward_pairs, bytes_sent FROM "
          "rank_layer_steps ORDER BY step, layer, rank";
      CHECK(column(db[3], plan) == column(db[1], plan));
      CHECK(doubles(db[1], "SELECT sum(modeled_overlapped_seconds) FROM moe_layer_steps")[0] == 0);
      CHECK(doubles(db[3], "SELECT min(modeled_overlapped_seconds) FROM moe_layer_steps")[0] >= 0);
      CHECK(doubles(db[3], "SELECT sum(modeled_overlapped_seconds) FROM moe_layer_steps")[0] > 0);
      CHECK(doubles(db[3], "SELECT sum(modeled_hidden_transfer_seconds) FROM moe_layer_steps")[0] ==
            0);
      CHECK(column(db[3],
                   "SELECT count(*) FROM moe_layer_steps WHERE abs(modeled_seconds - "
                   "(modeled_compute_seconds + modeled_all_to_all_seconds + modeled_gather_seconds "
                   "+ modeled_replica_seconds - modeled_overlapped_seconds)) > 1e-9 * "
                   "modeled_seconds") == "0 \n");
    }
  }
}

TEST_CASE("every bundle trains the tiny model to its target on two processes",
          "[distributed][slow]") {
  for (const std::string bundle : {"fixed", "symi", "lrmoe"}) {
    DYNAMIC_SECTION(bundle) {
      TempFolder dir;
      const std::string db = dir.file("results.db");
      auto [code, output] =
          run_lrmoe(with(with({"launch", "-n", "2", kTinyExperiment}, tiny_settings(2, 5, bundle)),
                         {"--db", db}),
                    dir.file("run.log"), std::chrono::seconds(300));
      INFO(output);
      REQUIRE(code == 0);
      CHECK(output.find("[rank 0] target eval loss    0.7500: reached") != std::string::npos);
      auto runs = lrmoe::ResultsStore::open_read_only(db)->list_runs();
      REQUIRE(runs.size() == 1);
      CHECK(runs[0].status == "finished");
      CHECK(runs[0].processes == 2);
      CHECK(runs[0].time_to_target.has_value());
    }
  }
}

TEST_CASE("a rank that dies or hangs ends the run as failed, with its committed steps",
          "[distributed][slow]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  const std::string tag = std::to_string(getpid()) + "-" + std::to_string(rand());
  const std::string marker = "LRMOE_TEST_LAUNCH=" + tag;
  ScopedEnvironment environment(std::map<std::string, std::string>{{"LRMOE_TEST_LAUNCH", tag}});
  const std::vector<std::string> args =
      with(with({LRMOE_BINARY, "launch", "-n", "2", kTinyExperiment}, tiny_settings(2, 5, "lrmoe")),
           {"--set", "train.target_loss=0", "--set", "train.max_steps=100000", "--set",
            "train.eval_every=5", "--set", "cluster.timeout=4", "--db", db});

  for (int fault : {SIGKILL, SIGSTOP}) {
    DYNAMIC_SECTION((fault == SIGKILL ? "killed" : "hung")) {
      ChildProcess launch(args, dir.file("launch.log"));
      lrmoe_test::wait_for_steps(db, 10);
      const pid_t rank1 = launched_rank(marker, 1);
      REQUIRE(rank1 > 0);
      const auto faulted = std::chrono::steady_clock::now();
      kill(rank1, fault);
      // Rank 0 notices within cluster.timeout (4 s); the launcher then stops what is left.
      const int code = launch.wait(std::chrono::seconds(60));
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - faulted).count();
      INFO(launch.output());
      CHECK(code != 0);
      CHECK(code != -1);  // ended on its own, not by the test's deadline
      CHECK(seconds < 30);
      if (fault == SIGKILL) {
        CHECK(launch.output().find("rank 1 was killed by signal 9") != std::string::npos);
        // Process 0 names its peer that is gone.
        CHECK(launch.output().find("process 1 (pid " + std::to_string(rank1) + ") has exited") !=
              std::string::npos);
      }
      // Rank 0's error, once, as the command's one error line, and how rank 0 ended.
      CHECK(launch.output().find("\nlrmoe: ") != std::string::npos);
      CHECK(launch.output().find("lrmoe launch: rank 0 exited with code 1 (the error above)") !=
            std::string::npos);
      if (fault == SIGSTOP) {
        CHECK(launch.output().find(
                  "another process of this run failed, was killed or stopped answering") !=
              std::string::npos);
      }

      auto store = lrmoe::ResultsStore::open_read_only(db);
      const auto run = store->list_runs().back();
      CHECK(run.status == "failed");
      CHECK(run.steps >= 10);
      CHECK(static_cast<int64_t>(store->steps(run.id).size()) == run.steps);
      CHECK(column(db, "SELECT count(*) FROM events WHERE run = " + std::to_string(run.id) +
                           " AND level = 'error' AND message LIKE '%across processes failed: %'") ==
            "1 \n");
    }
  }
}

TEST_CASE("Ctrl-C on lrmoe launch stops every process after the same step, recorded as stopped",
          "[distributed][slow]") {
  TempFolder dir;
  const std::string db = dir.file("results.db");
  ChildProcess launch(
      with(with({LRMOE_BINARY, "launch", "-n", "2", kTinyExperiment}, tiny_settings(2, 5, "fixed")),
           {"--set", "train.target_loss=0", "--set", "train.max_steps=100000", "--set",
            "train.eval_every=5", "--db", db}),
      dir.file("launch.log"));
  lrmoe_test::wait_for_steps(db, 10);
  launch.signal(SIGINT);
  const int code = launch.wait(std::chrono::seconds(60));
  INFO(launch.output());
  CHECK(code == 130);
  const auto run = lrmoe::ResultsStore::open_read_only(db)->list_runs().back();
  CHECK(run.status == "stopped");
  CHECK(run.steps >= 10);
}
