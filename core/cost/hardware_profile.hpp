#pragma once
// Named hardware profiles: the machine a cost model prices MoE-layer work on.
//
// A profile is a data file, experiments/hardware/<name>.toml, not code: one flat TOML document
// whose keys are the fields of HardwareProfile below (the format is described in
// experiments/hardware/README.md). The build copies the shipped files to <build>/runner/hardware
// and installs them to <prefix>/share/lrmoe/hardware, where a profile is found by its name.
// "this-machine" is not a file: probe_this_machine measures the host instead.
//
// Every problem a user can cause (an unknown name, a file that cannot be read or parsed, a
// missing, misspelt, mistyped or out-of-range key) is a std::invalid_argument with a one-line
// message that names the file and the key, and says what to do.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lrmoe {

// One point of the GEMM efficiency curve: a GEMM with `rows` rows (tokens of one expert)
// reaches `efficiency` x peak.
struct GemmEfficiencyPoint {
  double rows = 0;
  double efficiency = 1;
};

struct HardwareProfile {
  std::string name;  // file stem, e.g. "h100-sxm-8gpu-ib400"
  std::string description;
  std::string source;  // path of the file it was read from, or "probed on <host>" for this-machine
  double peak_flops = 0;  // dense GEMM FLOP/s of one rank at the profile's precision (datasheet)
  // Fraction of peak_flops a GEMM reaches, by rows (tokens) per GEMM, for the expert GEMM shapes;
  // at least one point; rows strictly increasing; efficiency in (0, 1]. Between points: linear
  // in log(rows); outside: clamped to the end points.
  std::vector<GemmEfficiencyPoint> gemm_efficiency;
  double memory_bandwidth = 0;  // device memory bytes/s (HBM), for the roofline of small GEMMs
  // bytes per activation/parameter element at the training precision (bf16: 2)
  int64_t element_bytes = 2;
  // ranks r and s share a node when r / ranks_per_node == s / ranks_per_node
  int64_t ranks_per_node = 1;
  // bytes/s one rank sends (and, separately, receives) to ranks on its node
  double intra_node_bandwidth = 0;
  double intra_node_latency = 0;  // seconds per message to a rank on its node
  // bytes/s one rank sends (and receives) to ranks on other nodes (its NIC)
  double inter_node_bandwidth = 0;
  double inter_node_latency = 0;  // seconds per message to a rank on another node
  // bytes/s between a rank's host memory and its device, each direction (PCIe): what moving
  // optimizer state's gradients and weights through the host costs
  double host_link_bandwidth = 0;

  // The curve above; 1 when it has no points (a default-constructed profile).
  double gemm_efficiency_at(double rows) const;
  // Every field, as a TOML document that load_hardware_profile reads back to an equal profile
  // (`source` is written as a comment: it is where a profile was read from, not part of it).
  std::string to_toml() const;
};

// `name_or_path`: a profile name, looked up as <dir>/<name>.toml in each of `search_dirs` in order
// (the first found wins; folders that do not exist are skipped), or a path to a .toml file (when
// it contains '/' or ends in ".toml"). The file's `name` key must equal its file stem.
HardwareProfile load_hardware_profile(const std::string& name_or_path,
                                      const std::vector<std::filesystem::path>& search_dirs);

// The folders searched for profiles by name, in order: the runner's own, "hardware" beside the
// executable (a build tree: <build>/runner/hardware), or <build>/runner/hardware seen from another
// executable of the build tree (the tests in <build>/tests), or "../share/lrmoe/hardware" from it
// (an installation) — the first of these that exists; then the folders of LRMOE_HARDWARE_PATH
// (':'-separated). The shipped profiles come first so that a shipped name always means the
// shipped file; add profiles under new names.
std::vector<std::filesystem::path> hardware_profile_dirs();

// The name of the measured profile; it names no file.
inline constexpr const char* kThisMachineProfile = "this-machine";

}  // namespace lrmoe
