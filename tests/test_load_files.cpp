// The load files replay reads besides a run's database: per-expert loads as CSV (what `lrmoe
// export --format expert-loads` writes) and routing as a NumPy array of expert ids [tokens, layers,
// top_k] (core/replay/expert_load_csv.hpp, core/replay/routing_npy.hpp). Command-line errors are
// cases in tests/cases/user_errors.toml.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/replay/expert_load_csv.hpp"
#include "core/replay/routing_npy.hpp"
#include "support/temp_folder.hpp"

namespace fs = std::filesystem;
using lrmoe::RecordedExpertLoads;
using Layers = std::vector<std::vector<int64_t>>;

namespace {

// A .npy file of `descr` ids with `shape`, the data `data` as raw bytes, header padded as numpy
// pads it (to a multiple of 64 bytes, ending in a newline).
std::string npy(const std::string& descr, const std::string& shape, const std::string& data,
                const std::string& fortran = "False") {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string file = "\x93NUMPY";
  file += '\x01';
  file += '\x00';
  file += static_cast<char>(header.size() % 256);
  file += static_cast<char>(header.size() / 256);
  return file + header + data;
}

std::string int32_bytes(const std::vector<int32_t>& ids) {
  std::string bytes;
  for (const int32_t id : ids)
    for (int b = 0; b < 4; ++b)
      bytes += static_cast<char>((static_cast<uint32_t>(id) >> (8 * b)) & 0xFF);
  return bytes;
}

}  // namespace

TEST_CASE("Exported per-expert loads read back as they were", "[replay]") {
  const lrmoe_test::TempFolder dir;
  const RecordedExpertLoads loads{
      "", {3, 7}, {Layers{{4, 0, 2}, {1, 1, 4}}, Layers{{0, 6, 0}, {2, 2, 2}}}};
  std::ostringstream text;
  lrmoe::write_expert_load_csv(loads, text);
  const RecordedExpertLoads read = lrmoe::read_expert_load_csv(dir.write("l.csv", text.str()));
  CHECK(read.steps == loads.steps);
  CHECK(read.pairs == loads.pairs);
}

TEST_CASE("A load file's columns are found by name, and its layers in increasing order",
          "[replay]") {
  const lrmoe_test::TempFolder dir;
  // Block indices 3 and 1 for layers; expert 2 of layer 1 has no row (it routed nothing).
  const std::string path = dir.write("l.csv",
                                     "pairs, expert ,layer,step,origin\r\n"
                                     "5,0,3,1,a\r\n"
                                     "\r\n"
                                     "2,2,3,1,a\r\n"
                                     "7,1,1,1,b\r\n");
  const RecordedExpertLoads read = lrmoe::read_expert_load_csv(path);
  CHECK(read.steps == std::vector<int64_t>{1});
  CHECK(read.pairs.front() == Layers{{0, 7, 0}, {5, 0, 2}});
}

TEST_CASE("A load file whose steps list different layers is refused, naming the step", "[replay]") {
  const lrmoe_test::TempFolder dir;
  const std::string path =
      dir.write("l.csv", "step,layer,expert,pairs\n1,0,0,1\n1,1,0,1\n2,0,0,1\n");
  CHECK_THROWS_WITH(lrmoe::read_expert_load_csv(path),
                    Catch::Contains("step 2 lists other MoE layers than step 1"));
  CHECK_THROWS_WITH(lrmoe::read_expert_load_csv(dir.write("e.csv", "step,layer,expert,pairs\n")),
                    Catch::Contains("no rows of loads after the header"));
  CHECK_THROWS_WITH(
      lrmoe::read_expert_load_csv(dir.write("x.csv", "step,layer,expert,pairs\n1,0,268435456,1\n")),
      Catch::Contains("x.csv:2: expert 268435456 is past the"));
  // Layers of the largest expert count are refused once they would hold too much, before it.
  std::string many = "step,layer,expert,pairs\n";
  for (int layer = 0; layer < 100; ++layer) many += "0," + std::to_string(layer) + ",268435455,1\n";
  CHECK_THROWS_WITH(lrmoe::read_expert_load_csv(dir.write("m.csv", many)),
                    Catch::Contains("m.csv:3: 268435456 experts over the layers and steps so far"));
  // A later step's layer that the first step does not have is refused where it starts.
  CHECK_THROWS_WITH(lrmoe::read_expert_load_csv(
                        dir.write("n.csv", "step,layer,expert,pairs\n1,0,0,1\n2,0,0,1\n2,5,0,1\n")),
                    Catch::Contains("n.csv:4: step 2 lists other MoE layers than step 1"));
  CHECK_THROWS_WITH(lrmoe::read_expert_load_csv(
                        dir.write("p.csv", "step,layer,expert,pairs\n1,0,0,1099511627777\n")),
                    Catch::Contains("p.csv:2: 1099511627777 pairs are more than"));
  CHECK_THROWS_WITH(lrmoe::read_expert_load_csv(dir.write("z.csv", "")),
                    Catch::Contains("z.csv: empty; it needs a header line"));
}

TEST_CASE("Routing ids are counted per step, layer and expert", "[replay]") {
  const lrmoe_test::TempFolder dir;
  // 5 tokens, 2 layers, top 2; 2 tokens a step: two steps, the fifth token left out.
  const std::vector<int32_t> ids = {0, 1, 2, 3,   // token 0: layer 0 -> 0, 1; layer 1 -> 2, 3
                                    1, 2, 3, 0,   // token 1
                                    0, 4, 0, 1,   // token 2
                                    0, 1, 0, 1,   // token 3
                                    4, 4, 4, 4};  // token 4, past the last whole step
  const std::string path = dir.write("r.npy", npy("<i4", "(5, 2, 2)", int32_bytes(ids)));
  const RecordedExpertLoads loads = lrmoe::read_routing_npy(path, 2);
  CHECK(loads.steps == std::vector<int64_t>{1, 2});
  CHECK(loads.pairs[0] == Layers{{1, 2, 1, 0, 0}, {1, 0, 1, 2, 0}});
  CHECK(loads.pairs[1] == Layers{{2, 1, 0, 0, 1}, {2, 2, 0, 0, 0}});
  // Fewer tokens than a step: the whole file is one step.
  CHECK(lrmoe::read_routing_npy(path, 100).pairs.size() == 1);
  // One-byte unsigned ids, no byte order.
  const std::string bytes = dir.write("u.npy", npy("|u1", "(1, 1, 2)", std::string("\x02\x00", 2)));
  CHECK(lrmoe::read_routing_npy(bytes, 1).pairs[0] == Layers{{1, 0, 1}});
}

TEST_CASE("Routing files that are not integer C-order arrays of three sizes are refused",
          "[replay]") {
  const lrmoe_test::TempFolder dir;
  const std::string four = int32_bytes({0, 1, 2, 3});
  auto refused = [&](const std::string& name, const std::string& file) {
    std::string what;
    try {
      lrmoe::read_routing_npy(dir.write(name, file), 1);
    } catch (const std::invalid_argument& error) {
      what = error.what();
    }
    return what;
  };
  CHECK_THAT(refused("a", npy("<f4", "(2, 1, 2)", four)),
             Catch::Contains("dtype '<f4' is not read"));
  CHECK_THAT(refused("b", npy(">i4", "(2, 1, 2)", four)),
             Catch::Contains("dtype '>i4' is not read"));
  CHECK_THAT(refused("c", npy("<i4", "(2, 1, 2)", four, "True")), Catch::Contains("Fortran order"));
  CHECK_THAT(refused("d", npy("<i4", "(4,)", four)), Catch::Contains("shape (4,) is not [tokens"));
  CHECK_THAT(refused("e", npy("<i4", "(2, 2, 2)", four)),
             Catch::Contains("16 bytes of data where"));
  CHECK_THAT(refused("f", npy("<i4", "(2, 1, 2)", int32_bytes({0, 1, -1, 3}))),
             Catch::Contains("token 1, layer 0, choice 0: expert id -1"));
  CHECK_THAT(refused("g", npy("<i4", "(2, 0, 2)", "")), Catch::Contains("every size above 0"));
  CHECK_THAT(refused("h", "PK\x03\x04"), Catch::Contains("not a NumPy .npy file"));
}
