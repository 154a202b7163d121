#pragma once
// Which of this host's addresses its peers reach it on, for the interface Gloo listens on.
// PyTorch's default resolves the host's name, which on many machines (and in network
// namespaces) gives a loopback address the other hosts cannot reach; the address this host
// itself uses to reach the master is one every host of a working cluster can reach.

#include <cstdint>
#include <optional>
#include <string>

namespace lrmoe {

// The local address of a UDP socket connected to `host`:`port` (no packet is sent: connecting a
// UDP socket only picks the route), or nothing when `host` does not resolve or no route leads
// there.
std::optional<std::string> address_towards(const std::string& host, int64_t port);

}  // namespace lrmoe
