// `lrmoe trace` (Note [Step trace]): a recorded step's timeline read back from the file it
// writes: every span nests on its track, every rank has its expert work in every layer and
// phase, every exchange arrives after it is issued, and the cost model's layers are beside.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/system/json_file.hpp"
#include "support/child_process.hpp"
#include "support/temp_folder.hpp"

using lrmoe_test::kTinyExperiment;
using lrmoe_test::run_lrmoe;
using lrmoe_test::TempFolder;
using nlohmann::json;

namespace {

// Spans (start, end) of one track nest: each lies inside the one open before it or starts after
// it ends. `slack`: microseconds of rounding allowed at the ends.
bool nested(std::vector<std::pair<double, double>> spans, double slack, std::string* why) {
  std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) {
    return a.first < b.first || (a.first == b.first && a.second > b.second);
  });
  std::vector<std::pair<double, double>> open;
  for (const auto& span : spans) {
    while (!open.empty() && open.back().second <= span.first + slack) open.pop_back();
    if (!open.empty() && span.second > open.back().second + slack) {
      *why = "[" + std::to_string(span.first) + ", " + std::to_string(span.second) +
             "] overlaps [" + std::to_string(open.back().first) + ", " +
             std::to_string(open.back().second) + "]";
      return false;
    }
    open.push_back(span);
  }
  return true;
}

}  // namespace

TEST_CASE("lrmoe trace writes a step's spans that nest, with every rank's work in every layer",
          "[trace]") {
  TempFolder dir;
  const std::string db = dir.file("trace.db");
  // Four ranks on two processes, chunked exchanges (calls in flight over the compute), every
  // step traced.
  auto [code, output] = run_lrmoe({"launch", "-n",
                                   "2",      kTinyExperiment,
                                   "--set",  "cluster.ranks=4",
                                   "--set",  "cluster.slots_per_rank=3",
                                   "--set",  "policies.bundle=lrmoe",
                                   "--set",  "cluster.exchange_chunks=2",
                                   "--set",  "train.max_steps=2",
                                   "--set",  "train.target_loss=0",
                                   "--set",  "train.trace_every=1",
                                   "--db",   db},
                                  dir.file("run.log"), std::chrono::seconds(240));
  INFO(output);
  REQUIRE(code == 0);

  const std::string file = dir.file("step2.json");
  auto [traced, said] =
      run_lrmoe({"trace", "1", "--step", "2", "--out", file, "--db", db}, dir.file("trace.log"));
  INFO(said);
  REQUIRE(traced == 0);
  CHECK_THAT(said, Catch::Contains("wrote " + file));
  const json trace = lrmoe::read_json_file(file, 64 << 20);
  REQUIRE(trace.at("traceEvents").is_array());

  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> tracks;
  std::set<std::tuple<int64_t, int64_t, std::string>> rank_work;  // (rank, layer, phase)
  std::map<int64_t, double> issued;                               // async id -> ts
  std::map<std::string, int> kinds;
  int modeled_layers = 0, arrived = 0;
  for (const json& event : trace.at("traceEvents")) {
    const std::string ph = event.at("ph");
    if (ph == "M") continue;
    const std::string cat = event.at("cat");
    ++kinds[cat];
    const double ts = event.at("ts");
    if (ph == "b") {
      issued[event.at("id").get<int64_t>()] = ts;
      continue;
    }
    if (ph == "e") {
      const auto id = event.at("id").get<int64_t>();
      REQUIRE(issued.count(id) == 1);
      CHECK(ts >= issued[id]);
      ++arrived;
      continue;
    }
    REQUIRE(ph == "X");
    const double dur = event.at("dur");
    CHECK(dur >= 0);
    tracks[{event.at("pid").get<int64_t>(), event.at("tid").get<int64_t>()}].push_back(
        {ts, ts + dur});
    if (cat == "expert") {
      const json& args = event.at("args");
      rank_work.insert({args.at("rank").get<int64_t>(), args.at("layer").get<int64_t>(),
                        args.at("phase").get<std::string>()});
    }
    if (cat == "modeled" && std::string(event.at("name")).rfind("MoE layer", 0) == 0)
      ++modeled_layers;
  }
  for (const auto& [track, spans] : tracks) {
    INFO("process " << track.first << ", track " << track.second);
    std::string why;
    CHECK(nested(spans, 1e-3, &why));
    INFO(why);
  }
  // Two MoE layers: every rank computed in both phases of both.
  for (int64_t rank = 0; rank < 4; ++rank) {
    for (int64_t layer = 0; layer < 2; ++layer) {
      for (const char* phase : {"forward", "backward"}) {
        INFO("rank " << rank << ", layer " << layer << ", " << phase);
        CHECK(rank_work.count({rank, layer, phase}) == 1);
      }
    }
  }
  // Each process: its step, each layer's two phases and their plans; eight all-to-all calls per
  // layer (four per chunk), each issued and arrived.
  CHECK(kinds["step"] == 2);
  CHECK(kinds["layer"] == 2 * 2 * 2);
  CHECK(kinds["plan"] == 2 * 2 * 2);
  CHECK(kinds["all-to-all"] == 2 * 2 * 8 * 2);  // begin and end events
  CHECK(arrived == static_cast<int>(issued.size()));
  CHECK(modeled_layers == 2);

  // A step without a timeline names those with one.
  auto [missing, refused] =
      run_lrmoe({"trace", "1", "--step", "7", "--db", db}, dir.file("missing.log"));
  CHECK(missing == 1);
  CHECK_THAT(refused, Catch::Contains("run 1 recorded no timeline of step 7; it recorded steps "
                                      "1, 2"));
}
