#include "core/distributed/collectives.hpp"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef LRMOE_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "core/device/compute_device.hpp"
#include "core/distributed/message_layout.hpp"
#include "core/distributed/route_address.hpp"
#include "core/distributed/thread_meeting.hpp"
#include "core/system/host_info.hpp"
#include "core/system/libtorch_compat.hpp"
#include "core/system/thread_cpu_clock.hpp"

namespace lrmoe {
namespace {

std::string message_of(const std::exception& error) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error))
    return c10_error->what_without_backtrace();
  return error.what();
}

// Whether process `pid` of this host has ended: no such process, or a zombie not yet reaped.
bool process_gone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  std::getline(stat, line);
  const auto after_name = line.rfind(')');  // the name in parentheses may hold anything
  return after_name != std::string::npos && line.size() > after_name + 2 &&
         line[after_name + 2] == 'Z';
}

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0;
}

c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> gloo_options(
    const LaunchEnvironment& launch, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  // The interface Gloo listens on: the one GLOO_SOCKET_IFNAME names (as in PyTorch), loopback
  // for single-host runs, else the address this host reaches the master from
  // (route_address.hpp), else the one this host's name resolves to.
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface && *interface) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  } else if (is_loopback(launch.master_addr)) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else if (const std::optional<std::string> address =
                 address_towards(launch.master_addr, launch.master_port)) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(*address));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return options;
}

// `rows` [n, ...] as [n, bytes per row] uint8, contiguous: rows travel as bytes, one path for
// every dtype the model uses, whatever the backend supports.
torch::Tensor as_byte_rows(const torch::Tensor& rows) {
  const auto sizes = rows.sizes();
  const int64_t width =
      std::accumulate(sizes.begin() + 1, sizes.end(), int64_t{1}, std::multiplies<>());
  return rows.reshape({rows.size(0), width}).contiguous().view(torch::kUInt8);
}

}  // namespace

struct Collectives::Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<compat::C10dBackend> backend;
  torch::Device device = torch::kCPU;  // where tensors must be for the backend
  // With NCCL, a Gloo group beside it for host tensors (losses, measurements, the stop vote),
  // which would otherwise pass through the device and wait for its queue (Note [Device
  // timing]); none with Gloo, which takes host tensors itself.
  c10::intrusive_ptr<compat::C10dBackend> host_backend;
  int64_t rank = 0;
  int64_t size = 1;

  // The backend a collective of `tensor` runs on, and where the tensor must be for it.
  struct Route {
    compat::C10dBackend* backend;
    torch::Device device;
    // Host tensors go through Gloo, which runs each collective on a worker thread of its own:
    // the worker lets go of the work, and of the buffers the work holds, only after the
    // caller's wait() has returned (Note [Memory model]). NCCL's routes are the device's.
    bool worker_holds_work() const { return device.is_cpu(); }
  };
  Route route(const torch::Tensor& tensor) const {
    if (tensor.is_cpu() && host_backend) return {host_backend.get(), torch::kCPU};
    return {backend.get(), device};
  }

  // Every process leaves its host and process id in the store, so that a survivor can say
  // which of its peers on the same host is gone.
  void register_process() {
    store->set(process_key(rank), to_bytes(fmt::format("{} {}", host_name(), getpid())));
  }

  // "process 1 (pid 4242) has exited" for each peer on this host whose process is gone.
  std::string gone_peers() {
    std::string gone;
    auto add = [&](const std::string& what) { gone += (gone.empty() ? "" : ", ") + what; };
    try {
      // the store lives in process 0, which may be the one gone
      store->setTimeout(std::chrono::seconds(1));
      for (int64_t peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        const std::vector<uint8_t> value = store->get(process_key(peer));
        std::istringstream fields(std::string(value.begin(), value.end()));
        std::string host;
        pid_t pid = 0;
        if (fields >> host >> pid && host == host_name() && process_gone(pid)) {
          add(fmt::format("process {} (pid {}) has exited", peer, pid));
        }
      }
    } catch (const std::exception&) {
      add("process 0, which hosts the rendezvous store, is unreachable");
    }
    return gone;
  }

  // Issues one collective without waiting for it; a failure is a peer's failure.
  template <typename Call>
  auto start(const char* what, Call&& call) {
    try {
      return call();
    } catch (const std::exception& error) {
      throw peer_error(what, error);
    }
  }

  // Waits for a collective issued by start() along `route`; a failure is a peer's failure.
  // Where the backend's worker still holds the work, it waits until the worker lets go (it does
  // so at once, unless the scheduler has put it off): otherwise the buffers the work holds are
  // freed whenever the worker next runs, and what the process holds at its peak depends on the
  // scheduler. The bound only keeps a starved worker from stalling the caller.
  template <typename Work>
  void finish(const char* what, const Work& work, const Route& route) {
    try {
      work->wait();
    } catch (const std::exception& error) {
      throw peer_error(what, error);
    }
    if (!route.worker_holds_work()) return;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (work.use_count() > 1 && std::chrono::steady_clock::now() < give_up)
      std::this_thread::yield();
  }

  // Runs one collective along `route`.
  template <typename Call>
  void run(const char* what, const Route& route, Call&& call) {
    finish(what, start(what, std::forward<Call>(call)), route);
  }

  PeerError peer_error(const char* what, const std::exception& error) {
    // A killed peer's sockets close while its process is still exiting: look again for a
    // moment before saying that no peer is gone.
    std::string gone = gone_peers();
    for (int look = 0; gone.empty() && look < 20; ++look) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      gone = gone_peers();
    }
    return PeerError(fmt::format(
        "{} across processes failed: {} ({})", what,
        gone.empty() ? "another process of this run failed, was killed or stopped answering "
                       "for cluster.timeout"
                     : gone,
        message_of(error)));
  }

 private:
  static std::string process_key(int64_t rank) { return fmt::format("lrmoe/process/{}", rank); }
  static std::vector<uint8_t> to_bytes(const std::string& text) {
    return {text.begin(), text.end()};
  }
};

std::shared_ptr<Collectives> Collectives::connect(const LaunchEnvironment& launch,
                                                  std::chrono::milliseconds timeout,
                                                  CollectiveBackend backend) {
  auto collectives = std::make_shared<Collectives>();
  collectives->rank_ = launch.rank;
  collectives->local_rank_ = launch.local_rank;
  collectives->size_ = launch.world_size;
  if (launch.world_size == 1) return collectives;

  auto group = std::make_unique<Group>();
  const std::string where = fmt::format("{}:{}", launch.master_addr, launch.master_port);
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(launch.master_port);
    options.isServer = launch.rank == 0;
    options.numWorkers = static_cast<std::size_t>(launch.world_size);
    options.waitWorkers = true;
    options.timeout = timeout;
    group->store = c10::make_intrusive<c10d::TCPStore>(launch.master_addr, options);
  } catch (const std::exception& error) {
    throw LaunchError(fmt::format(
        launch.rank == 0
            ? "rendezvous: process 0 could not host the TCPStore at {} ({}); the port may be in "
              "use: pick another "
              "MASTER_PORT or cluster.master_port, or let `lrmoe launch` pick a free one"
            : "rendezvous: process {2} could not reach the TCPStore at {0} ({1}); check that "
              "process 0 runs and that "
              "MASTER_ADDR/MASTER_PORT (or cluster.master_addr/master_port) name it",
        where, message_of(error), launch.rank));
  }
  try {
    if (backend == CollectiveBackend::Nccl) {
#ifdef LRMOE_WITH_NCCL
      group->device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(launch.local_rank));
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      group->backend =
          c10::make_intrusive<c10d::ProcessGroupNCCL>(group->store, static_cast<int>(launch.rank),
                                                      static_cast<int>(launch.world_size), options);
      group->host_backend = c10::make_intrusive<c10d::ProcessGroupGloo>(
          c10::make_intrusive<c10d::PrefixStore>("lrmoe/host", group->store),
          static_cast<int>(launch.rank), static_cast<int>(launch.world_size),
          gloo_options(launch, timeout));
#else
      throw LaunchError(
          "cluster.backend = \"nccl\" needs a build against a CUDA LibTorch with "
          "-DLRMOE_WITH_NCCL=ON");
#endif
    } else {
      group->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(
          group->store, static_cast<int>(launch.rank), static_cast<int>(launch.world_size),
          gloo_options(launch, timeout));
    }
  } catch (const LaunchError&) {
    throw;
  } catch (const std::exception& error) {
    throw LaunchError(fmt::format(
        "rendezvous at {}: process {} could not connect to the other {} processes within "
        "cluster.timeout ({})",
        where, launch.rank, launch.world_size - 1, message_of(error)));
  }
  group->rank = launch.rank;
  group->size = launch.world_size;
  group->register_process();
  collectives->group_ = std::move(group);
  return collectives;
}

std::shared_ptr<Collectives> Collectives::connect(const LaunchEnvironment& launch,
                                                  const ClusterConfig& cluster,
                                                  const TrainConfig& train) {
  return connect(launch, std::chrono::milliseconds(static_cast<int64_t>(cluster.timeout * 1000)),
                 resolve_backend(cluster.backend, resolve_device(train.device, launch.local_rank)));
}

std::shared_ptr<Collectives> Collectives::join_threads(std::shared_ptr<ThreadMeeting> meeting,
                                                       int64_t rank) {
  auto collectives = std::make_shared<Collectives>();
  collectives->rank_ = rank;
  collectives->size_ = meeting->size();
  if (collectives->size_ > 1) collectives->meeting_ = std::move(meeting);
  return collectives;
}

Collectives::Collectives() = default;
Collectives::~Collectives() = default;

void Collectives::sum(torch::Tensor& tensor) {
  all_reduce(tensor, /*maximum=*/false);
}

void Collectives::max(torch::Tensor& tensor) {
  all_reduce(tensor, /*maximum=*/true);
}

void Collectives::all_reduce(torch::Tensor& tensor, bool maximum) {
  if (single()) return;
  CollectiveCpuScope collective(meeting_ != nullptr);
  if (meeting_) {
    meeting_->all_reduce(rank_, tensor, maximum);
    return;
  }
  const Group::Route route = group_->route(tensor);
  std::vector<torch::Tensor> tensors{tensor.contiguous().to(route.device)};
  c10d::AllreduceOptions options;
  options.reduceOp = maximum ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
  group_->run(maximum ? "max" : "sum", route,
              [&] { return route.backend->allreduce(tensors, options); });
  tensor.copy_(tensors[0]);
}

torch::Tensor Collectives::gather_rows(const torch::Tensor& local, std::vector<int64_t>* counts) {
  if (single()) {
    if (counts) *counts = {local.size(0)};
    return local;
  }
  torch::Tensor sizes = torch::zeros({size_}, torch::kInt64);
  sizes[rank_] = local.size(0);
  sum(sizes);
  std::vector<int64_t> rows(sizes.data_ptr<int64_t>(), sizes.data_ptr<int64_t>() + size_);
  if (counts) *counts = rows;
  return gather_rows(local, rows);
}

torch::Tensor Collectives::gather_rows(const torch::Tensor& local,
                                       const std::vector<int64_t>& rows) {
  if (single()) return local;
  CollectiveCpuScope collective(meeting_ != nullptr);
  if (meeting_) return meeting_->gather_rows(rank_, local);
  // Collective gathers want equal shapes: every part is padded to the largest.
  const int64_t widest = std::max<int64_t>(1, *std::max_element(rows.begin(), rows.end()));
  auto shape = local.sizes().vec();
  shape[0] = widest;
  torch::Tensor padded = torch::zeros(shape, local.options());
  padded.narrow(0, 0, local.size(0)).copy_(local);

  const Group::Route route = group_->route(padded);
  std::vector<torch::Tensor> inputs{padded.to(route.device)};
  std::vector<std::vector<torch::Tensor>> outputs(1);
  for (int64_t p = 0; p < size_; ++p) outputs[0].push_back(torch::empty_like(inputs[0]));
  group_->run("gather", route, [&] { return route.backend->allgather(outputs, inputs); });
  std::vector<torch::Tensor> parts;
  for (int64_t p = 0; p < size_; ++p)
    parts.push_back(outputs[0][p].narrow(0, 0, rows[p]).to(local.device()));
  return torch::cat(parts, 0);
}

torch::Tensor Collectives::exchange_rows(const torch::Tensor& send,
                                         const std::vector<int64_t>& send_rows,
                                         const std::vector<int64_t>& recv_rows) {
  if (single()) return send;
  CollectiveCpuScope collective(meeting_ != nullptr);
  auto shape = send.sizes().vec();
  if (meeting_) {
    const torch::Tensor bytes = as_byte_rows(send);
    std::vector<int64_t> send_bytes = send_rows, recv_bytes = recv_rows;
    for (int64_t& n : send_bytes) n *= bytes.size(1);
    for (int64_t& n : recv_bytes) n *= bytes.size(1);
    const torch::Tensor arrived =
        meeting_->exchange_bytes(rank_, bytes.reshape({-1, 1}), send_bytes, recv_bytes);
    shape[0] = std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0});
    return arrived.view(send.scalar_type()).reshape(shape);
  }
  const Group::Route route = group_->route(send);
  torch::Tensor bytes = as_byte_rows(send).to(route.device);  // c10d takes it non-const
  const int64_t received = std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0});
  torch::Tensor output = torch::empty({received, bytes.size(1)}, bytes.options());
  std::vector<int64_t> out_splits = recv_rows, in_splits = send_rows;
  group_->run("all-to-all-v", route,
              [&] { return route.backend->alltoall_base(output, bytes, out_splits, in_splits); });
  shape[0] = received;
  return output.to(send.device()).view(send.scalar_type()).reshape(shape);
}

// An exchange under way: the packed buffers and the c10d work, kept until it is waited for.
struct Collectives::PendingMessages::State {
  Collectives::Group* group = nullptr;             // null once waited for, or with one process
  std::optional<Collectives::Group::Route> route;  // the exchange's, while group is set
  decltype(std::declval<compat::C10dBackend&>().barrier()) work;
  std::optional<MessageLayout> layout;
  std::size_t messages = 0;
  torch::Tensor send, arrived;  // [bytes, 1] uint8 on the backend's device
  std::vector<int64_t> send_bytes, recv_bytes;
  torch::Device device = torch::kCPU;   // the messages' device, where they arrive
  std::vector<torch::Tensor> received;  // once waited for (at once with one process or threads)

  // `arrived`, on the messages' device, as what wait() returns.
  void unpack() {
    const torch::Tensor here = arrived.to(device);
    if (!layout) received.push_back(here);
    for (std::size_t m = 0; m < messages; ++m)
      received.push_back(unpack_message(*layout, here, m, torch::Tensor()));
  }
};

Collectives::PendingMessages::PendingMessages(std::unique_ptr<State> state)
    : state_(std::move(state)) {}
Collectives::PendingMessages::PendingMessages(PendingMessages&&) noexcept = default;
Collectives::PendingMessages& Collectives::PendingMessages::operator=(PendingMessages&&) noexcept =
    default;
// c10d's work holds the buffers it reads and writes: one left unwaited-for (its caller failed)
// frees nothing under the exchange.
Collectives::PendingMessages::~PendingMessages() = default;

std::vector<torch::Tensor> Collectives::PendingMessages::wait() {
  State& s = *state_;
  if (s.group) {
    s.group->finish("all-to-all-v", s.work, *s.route);
    s.group = nullptr;
    // What was sent, and the work that holds it, are done with: freed before the messages are
    // unpacked, and what arrived once they are, not when the caller lets go of the exchange.
    s.work = {};
    s.send = torch::Tensor();
    s.unpack();
    s.arrived = torch::Tensor();
  }
  return s.received;
}

Collectives::PendingMessages Collectives::start_exchange_messages(
    const std::vector<RowMessage>& messages) {
  auto state = std::make_unique<PendingMessages::State>();
  if (single()) {
    for (const RowMessage& m : messages) state->received.push_back(m.rows);
    return PendingMessages(std::move(state));
  }
  CollectiveCpuScope collective(meeting_ != nullptr);
  std::vector<MessageShape> shapes;
  for (const RowMessage& m : messages)
    shapes.push_back(message_shape(m.rows, m.send_rows, m.recv_rows));
  const MessageLayout& layout = state->layout.emplace(shapes);
  state->messages = messages.size();
  state->device = messages.front().rows.device();
  const torch::Tensor send = layout.send_buffer(state->device);
  for (std::size_t i = 0; i < messages.size(); ++i) {
    layout.fill_send_parts(send, i, [&](torch::Tensor& part, int64_t first) {
      part.copy_(messages[i].rows.narrow(0, first, part.size(0)));
    });
  }
  start_bytes(*state, send, layout.send_bytes(), layout.recv_bytes());
  return PendingMessages(std::move(state));
}

Collectives::PendingMessages Collectives::start_exchange_bytes(
    const torch::Tensor& send, const std::vector<int64_t>& send_bytes,
    const std::vector<int64_t>& recv_bytes) {
  auto state = std::make_unique<PendingMessages::State>();
  if (single()) {
    state->received.push_back(send);
    return PendingMessages(std::move(state));
  }
  CollectiveCpuScope collective(meeting_ != nullptr);
  state->device = send.device();
  start_bytes(*state, send, send_bytes, recv_bytes);
  return PendingMessages(std::move(state));
}

void Collectives::start_bytes(PendingMessages::State& s, const torch::Tensor& send,
                              const std::vector<int64_t>& send_bytes,
                              const std::vector<int64_t>& recv_bytes) {
  if (meeting_) {  // in memory, at once: wait() finds it done
    s.arrived = meeting_->exchange_bytes(rank_, send, send_bytes, recv_bytes);
    s.unpack();
    return;
  }
  const Group::Route route = group_->route(send);
  s.send = send.to(route.device);
  s.send_bytes = send_bytes;
  s.recv_bytes = recv_bytes;
  const int64_t received = std::accumulate(recv_bytes.begin(), recv_bytes.end(), int64_t{0});
  s.arrived = torch::empty({received, 1}, s.send.options());
  s.work = group_->start("all-to-all-v", [&] {
    return route.backend->alltoall_base(s.arrived, s.send, s.recv_bytes, s.send_bytes);
  });
  s.group = group_.get();
  s.route = route;
}

std::vector<torch::Tensor> Collectives::exchange_messages(const std::vector<RowMessage>& messages) {
  if (messages.size() == 1 && !single()) {  // as it is, without packing it into runs
    return {exchange_rows(messages[0].rows, messages[0].send_rows, messages[0].recv_rows)};
  }
  return start_exchange_messages(messages).wait();
}

void Collectives::barrier() {
  if (single()) return;
  CollectiveCpuScope collective(meeting_ != nullptr);
  if (meeting_) {
    meeting_->barrier();
    return;
  }
  const Group::Route route{group_->backend.get(), group_->device};
  group_->run("barrier", route, [&] { return route.backend->barrier(); });
}

}  // namespace lrmoe
