// Hardware profiles: the shipped files load by name and round-trip, the GEMM efficiency curve
// interpolates in log(rows) and clamps, every kind of profile error names the file and the key,
// and the probe of this machine gives usable figures.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cost/hardware_profile.hpp"
#include "core/cost/machine_probe.hpp"
#include "support/temp_folder.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using lrmoe::GemmEfficiencyPoint;
using lrmoe::HardwareProfile;
using lrmoe::load_hardware_profile;
using lrmoe_test::TempFolder;

namespace {

const fs::path kShippedDir = fs::path(LRMOE_SOURCE_DIR) / "experiments" / "hardware";
const fs::path kBuildDir = fs::path(LRMOE_BUILD_DIR) / "runner" / "hardware";

// The message of the std::invalid_argument that `load` throws, or a note that it threw none.
std::string profile_error(const std::function<void()>& load) {
  try {
    load();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<no std::invalid_argument>";
}

// Every field but `source` (where a profile was read from).
void check_same_profile(const HardwareProfile& a, const HardwareProfile& b) {
  CHECK(a.name == b.name);
  CHECK(a.description == b.description);
  CHECK(a.peak_flops == b.peak_flops);
  REQUIRE(a.gemm_efficiency.size() == b.gemm_efficiency.size());
  for (std::size_t i = 0; i < a.gemm_efficiency.size(); ++i) {
    CHECK(a.gemm_efficiency[i].rows == b.gemm_efficiency[i].rows);
    CHECK(a.gemm_efficiency[i].efficiency == b.gemm_efficiency[i].efficiency);
  }
  CHECK(a.memory_bandwidth == b.memory_bandwidth);
  CHECK(a.element_bytes == b.element_bytes);
  CHECK(a.ranks_per_node == b.ranks_per_node);
  CHECK(a.intra_node_bandwidth == b.intra_node_bandwidth);
  CHECK(a.intra_node_latency == b.intra_node_latency);
  CHECK(a.inter_node_bandwidth == b.inter_node_bandwidth);
  CHECK(a.inter_node_latency == b.inter_node_latency);
  CHECK(a.host_link_bandwidth == b.host_link_bandwidth);
}

// Writes `profile.to_toml()` to <folder>/<name>.toml and reads it back.
HardwareProfile round_trip(const HardwareProfile& profile, const TempFolder& folder) {
  const fs::path file = folder.write(profile.name + ".toml", profile.to_toml());
  return load_hardware_profile(file.string(), {});
}

std::vector<std::string> shipped_names() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kShippedDir)) {
    if (entry.path().extension() == ".toml") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A valid profile document named `name`, one key per line.
std::string valid_text(const std::string& name) {
  return "name = \"" + name +
         "\"\n"                                         // line 1
         "description = \"a test machine\"\n"           // line 2
         "peak_flops = 1e15\n"                          // line 3
         "gemm_efficiency = [[16, 0.1], [128, 0.8]]\n"  // line 4
         "memory_bandwidth = 3e12\n"                    // line 5
         "element_bytes = 2\n"                          // line 6
         "ranks_per_node = 8\n"                         // line 7
         "intra_node_bandwidth = 370e9\n"               // line 8
         "intra_node_latency = 3.5e-6\n"                // line 9
         "inter_node_bandwidth = 48e9\n"                // line 10
         "inter_node_latency = 14e-6\n"                 // line 11
         "host_link_bandwidth = 52.8e9\n";              // line 12
}

// `text` with the line of `key` replaced by `line` (removed when `line` is empty).
std::string with_line(std::string text, const std::string& key, const std::string& line) {
  std::size_t at = 0;
  if (text.rfind(key + " = ", 0) != 0) {
    at = text.find("\n" + key + " = ");
    REQUIRE(at != std::string::npos);
    ++at;
  }
  const std::size_t end = text.find('\n', at);
  text.replace(at, end + 1 - at, line.empty() ? "" : line + "\n");
  return text;
}

// The error of loading `text` as the profile file <folder>/<name>.toml; `file` receives its path.
std::string error_of(const TempFolder& folder, const std::string& text, std::string& file,
                     const std::string& name = "test-machine") {
  file = folder.write(name + ".toml", text).string();
  return profile_error([&] { load_hardware_profile(file, {}); });
}

}  // namespace

TEST_CASE("every shipped hardware profile loads by name and round-trips through to_toml",
          "[hardware]") {
  const std::vector<std::string> names = shipped_names();
  CHECK(std::find(names.begin(), names.end(), "h100-sxm-8gpu-ib400") != names.end());
  CHECK(std::find(names.begin(), names.end(), "h200-sxm-8gpu-ib400") != names.end());
  TempFolder folder;
  for (const std::string& name : names) {
    INFO(name);
    const HardwareProfile profile = load_hardware_profile(name, {kShippedDir});
    CHECK(profile.name == name);
    CHECK(profile.source == (kShippedDir / (name + ".toml")).string());
    CHECK_FALSE(profile.description.empty());
    CHECK(profile.peak_flops > 0);
    CHECK_FALSE(profile.gemm_efficiency.empty());
    const HardwareProfile again = round_trip(profile, folder);
    check_same_profile(profile, again);
    CHECK(again.to_toml().find(profile.source) == std::string::npos);  // a copy names its own file
    // The build copies the same file beside the runner.
    const HardwareProfile built = load_hardware_profile(name, {kBuildDir});
    check_same_profile(profile, built);
  }
}

TEST_CASE("shipped profiles hold the datasheet figures they cite", "[hardware]") {
  const HardwareProfile h100 = load_hardware_profile("h100-sxm-8gpu-ib400", {kShippedDir});
  const HardwareProfile h200 = load_hardware_profile("h200-sxm-8gpu-ib400", {kShippedDir});
  CHECK(h100.peak_flops == 989e12);
  CHECK(h200.peak_flops == 989e12);
  CHECK(h100.memory_bandwidth == 3.35e12);
  CHECK(h200.memory_bandwidth == 4.8e12);
  for (const HardwareProfile* profile : {&h100, &h200}) {
    CHECK(profile->element_bytes == 2);
    CHECK(profile->ranks_per_node == 8);
    CHECK(profile->intra_node_bandwidth <= 450e9);  // at most the NVLink 4 wire rate per direction
    CHECK(profile->inter_node_bandwidth <= 50e9);   // at most 400 Gb/s
    CHECK(profile->gemm_efficiency_at(1e6) == Approx(0.78));
  }
  // 96 rows lies halfway (in log2) between the points at 64 and 128 rows: log2(96/64) = 0.585.
  CHECK(h100.gemm_efficiency_at(96) == Approx(0.39 + 0.39 * std::log2(1.5)));
}

TEST_CASE(
    "a path finds a profile file, and hardware_profile_dirs has the build copies and "
    "LRMOE_HARDWARE_PATH",
    "[hardware]") {
  const fs::path file = kShippedDir / "h200-sxm-8gpu-ib400.toml";
  CHECK(load_hardware_profile(file.string(), {}).name == "h200-sxm-8gpu-ib400");

  const char* saved = std::getenv("LRMOE_HARDWARE_PATH");
  const std::optional<std::string> previous =
      saved ? std::optional<std::string>(saved) : std::nullopt;
  TempFolder folder;
  const fs::path extra = folder.path() / "extra";
  folder.write("extra/test-machine.toml", valid_text("test-machine"));
  setenv("LRMOE_HARDWARE_PATH", ("/nonexistent/lrmoe-hardware::" + extra.string()).c_str(), 1);
  const std::vector<fs::path> dirs = lrmoe::hardware_profile_dirs();
  if (previous) {
    setenv("LRMOE_HARDWARE_PATH", previous->c_str(), 1);
  } else {
    unsetenv("LRMOE_HARDWARE_PATH");
  }

  REQUIRE(dirs.size() == 3);
  CHECK(fs::equivalent(dirs[0], kBuildDir));  // the test program lives in <build>/tests
  CHECK(dirs[1] == fs::path("/nonexistent/lrmoe-hardware"));
  CHECK(dirs[2] == extra);
  CHECK(load_hardware_profile("h100-sxm-8gpu-ib400", dirs).name == "h100-sxm-8gpu-ib400");
  // a missing folder is skipped
  const HardwareProfile mine = load_hardware_profile("test-machine", dirs);
  CHECK(mine.source == (extra / "test-machine.toml").string());
  CHECK(mine.ranks_per_node == 8);
}

TEST_CASE("the GEMM efficiency curve is linear in log(rows) and clamped at its ends",
          "[hardware]") {
  HardwareProfile profile;
  CHECK(profile.gemm_efficiency_at(100) == 1.0);  // no points: no loss

  profile.gemm_efficiency = {{10, 0.2}, {1000, 0.8}};
  CHECK(profile.gemm_efficiency_at(10) == Approx(0.2));
  CHECK(profile.gemm_efficiency_at(100) == Approx(0.5));  // log10: 1 -> 2 -> 3, halfway
  // a quarter of the way
  CHECK(profile.gemm_efficiency_at(std::sqrt(10.0 * 100.0)) == Approx(0.35));
  CHECK(profile.gemm_efficiency_at(1000) == Approx(0.8));
  CHECK(profile.gemm_efficiency_at(1) == Approx(0.2));  // clamped below
  CHECK(profile.gemm_efficiency_at(0) == Approx(0.2));
  CHECK(profile.gemm_efficiency_at(-5) == Approx(0.2));
  CHECK(profile.gemm_efficiency_at(1e9) == Approx(0.8));  // clamped above

  profile.gemm_efficiency = {{1, 0.1}, {16, 0.5}, {256, 0.9}};
  CHECK(profile.gemm_efficiency_at(4) == Approx(0.3));  // log2 4 / log2 16 = 1/2 of 0.1 -> 0.5
  CHECK(profile.gemm_efficiency_at(16) == Approx(0.5));
  // log2(64/16) / log2(256/16) = 1/2 of 0.5 -> 0.9
  CHECK(profile.gemm_efficiency_at(64) == Approx(0.7));
  CHECK(profile.gemm_efficiency_at(2) == Approx(0.2));  // 1/4 of the first segment

  profile.gemm_efficiency = {{32, 0.6}};
  CHECK(profile.gemm_efficiency_at(1) == Approx(0.6));
  CHECK(profile.gemm_efficiency_at(1e6) == Approx(0.6));
}

TEST_CASE("an unknown profile name lists the profiles there are", "[hardware]") {
  const std::string message =
      profile_error([] { load_hardware_profile("h100-sxm", {kShippedDir}); });
  CHECK_THAT(message, StartsWith("unknown hardware profile 'h100-sxm'"));
  CHECK_THAT(message, Contains("'h100-sxm-8gpu-ib400'"));
  CHECK_THAT(message, Contains("'h200-sxm-8gpu-ib400'"));
  CHECK_THAT(message, Contains(kShippedDir.string()));
  CHECK_THAT(message, Contains("this-machine"));
  CHECK_THAT(message, Contains("LRMOE_HARDWARE_PATH"));
  CHECK(message.find('\n') == std::string::npos);
  CHECK_THAT(profile_error([] { load_hardware_profile("", {kShippedDir}); }),
             Contains("name is empty"));
}

TEST_CASE("profile errors name the file, the place and the key, and say what to do", "[hardware]") {
  TempFolder folder;
  std::string file;
  const std::string valid = valid_text("test-machine");
  REQUIRE(error_of(folder, valid, file) == "<no std::invalid_argument>");

  SECTION("missing key") {
    const std::string message = error_of(folder, with_line(valid, "memory_bandwidth", ""), file);
    CHECK_THAT(message, StartsWith(file + ": missing key 'memory_bandwidth'"));
    CHECK_THAT(message, Contains("add it"));
  }
  SECTION("wrong type") {
    std::string message =
        error_of(folder, with_line(valid, "peak_flops", "peak_flops = \"989e12\""), file);
    CHECK_THAT(message, StartsWith(file + ":3:"));
    CHECK_THAT(message, Contains("peak_flops must be a number, not a string"));
    message = error_of(folder, with_line(valid, "ranks_per_node", "ranks_per_node = 8.0"), file);
    CHECK_THAT(message, StartsWith(file + ":7:"));
    CHECK_THAT(message, Contains("ranks_per_node must be an integer, not a float"));
    message = error_of(folder, with_line(valid, "description", "description = 3"), file);
    CHECK_THAT(message, StartsWith(file + ":2:"));
    CHECK_THAT(message, Contains("description must be a string, not an integer"));
    message =
        error_of(folder, with_line(valid, "gemm_efficiency", "gemm_efficiency = [16, 0.1]"), file);
    CHECK_THAT(message, StartsWith(file + ":4:"));
    CHECK_THAT(message, Contains("gemm_efficiency[0] must be a [rows, efficiency] pair"));
  }
  SECTION("value out of range") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"peak_flops = 0", "peak_flops = 0.0 is out of range"},
        {"memory_bandwidth = -3e12", "memory_bandwidth = -3000000000000.0 is out of range"},
        {"intra_node_bandwidth = inf", "intra_node_bandwidth = inf is out of range"},
        {"inter_node_latency = -1e-6", "inter_node_latency = -1e-06 is out of range"},
        {"element_bytes = 3", "element_bytes = 3 is out of range"},
        {"ranks_per_node = 0", "ranks_per_node = 0 is out of range"},
        {"gemm_efficiency = [[16, 0.1], [128, 1.5]]",
         "gemm_efficiency[1] efficiency = 1.5 is out of range"},
        {"gemm_efficiency = [[16, 0.0]]", "gemm_efficiency[0] efficiency = 0.0 is out of range"},
        {"gemm_efficiency = [[0, 0.5]]", "gemm_efficiency[0] rows = 0.0 is out of range"},
        {"gemm_efficiency = [[128, 0.5], [16, 0.1]]",
         "gemm_efficiency[1] rows = 16 does not follow 128"},
        {"gemm_efficiency = []", "gemm_efficiency is empty"},
    };
    for (const auto& [line, expected] : cases) {
      INFO(line);
      const std::string key = line.substr(0, line.find(' '));
      const std::string message = error_of(folder, with_line(valid, key, line), file);
      CHECK_THAT(message, StartsWith(file + ":"));
      CHECK_THAT(message, Contains(expected));
      CHECK(message.find('\n') == std::string::npos);
    }
  }
  SECTION("unknown key") {
    const std::string message = error_of(folder, valid + "peak_flop = 1e15\n", file);
    CHECK_THAT(message,
               StartsWith(file + ":13:1: unknown key 'peak_flop' (did you mean 'peak_flops'?)"));
    CHECK_THAT(message, Contains("'inter_node_latency'"));  // lists the keys there are
    CHECK_THAT(error_of(folder, valid + "[cluster]\nranks = 8\n", file),
               Contains("unknown key 'cluster'"));
  }
  SECTION("name differs from the file name") {
    const std::string message = error_of(folder, valid, file, "other-machine");
    CHECK_THAT(message, StartsWith(file + ":1:"));
    CHECK_THAT(message,
               Contains("name = \"test-machine\" differs from the file name \"other-machine\""));
  }
  SECTION("TOML syntax error") {
    const std::string message =
        error_of(folder, with_line(valid, "peak_flops", "peak_flops = = 3"), file);
    CHECK_THAT(message, StartsWith(file + ":3:"));
    CHECK_THAT(message, Contains("fix the TOML syntax"));
  }
  SECTION("unreadable file") {
    const std::string missing = folder.file("missing.toml");
    std::string message = profile_error([&] { load_hardware_profile(missing, {}); });
    CHECK_THAT(message, StartsWith(missing + ": cannot read this hardware profile (no such file)"));
    fs::create_directories(folder.path() / "folder.toml");
    const std::string directory = folder.file("folder.toml");
    message = profile_error([&] { load_hardware_profile(directory, {}); });
    CHECK_THAT(message,
               StartsWith(directory + ": cannot read this hardware profile (not a regular file)"));
    // By name, a folder that shadows a profile is an error too, not a silent skip.
    message = profile_error([&] { load_hardware_profile("folder", {folder.path()}); });
    CHECK_THAT(message, StartsWith(directory + ": cannot read"));
  }
}

TEST_CASE("probe_this_machine measures positive finite figures", "[hardware]") {
  const HardwareProfile profile = lrmoe::probe_this_machine(3);
  CHECK(profile.name == "this-machine");
  CHECK_THAT(profile.source, StartsWith("probed on "));
  for (double figure : {profile.peak_flops, profile.memory_bandwidth, profile.intra_node_bandwidth,
                        profile.intra_node_latency, profile.inter_node_bandwidth,
                        profile.inter_node_latency, profile.host_link_bandwidth}) {
    CHECK(std::isfinite(figure));
    CHECK(figure > 0);
  }
  CHECK(profile.element_bytes == 4);
  CHECK(profile.ranks_per_node == 3);
  REQUIRE(profile.gemm_efficiency.size() == 1);
  CHECK(profile.gemm_efficiency[0].rows == 1);
  CHECK(profile.gemm_efficiency[0].efficiency == 1.0);
  CHECK(profile.inter_node_bandwidth == profile.intra_node_bandwidth);
  CHECK(profile.inter_node_latency == profile.intra_node_latency);
  TempFolder folder;
  check_same_profile(profile, round_trip(profile, folder));
  CHECK_THAT(profile_error([] { lrmoe::probe_this_machine(0); }), Contains("ranks = 0"));
}
