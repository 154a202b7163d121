#pragma once
// The processes of one run and the few collectives the harness needs, over PyTorch's own c10d
// process groups: rendezvous through a TCPStore hosted by process 0, then Gloo (CPU) or, in
// builds with LRMOE_WITH_NCCL, NCCL, with a Gloo group beside it: a collective runs where its
// tensor is, host tensors over Gloo and device tensors over NCCL. A run of one process has no
// process group and every collective is the identity, so the single-process path does no
// communication at all.
//
// Every collective blocks until it completes. A peer that died or stopped answering makes it
// throw PeerError within cluster.timeout: the caller records the run as failed.

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config/cluster_config.hpp"
#include "core/config/train_config.hpp"
#include "core/distributed/launch_environment.hpp"

namespace lrmoe {

// A collective failed because another process of the run failed, hung or went away.
class PeerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ThreadMeeting;

class Collectives {
 public:
  // One process: every collective is the identity.
  Collectives();
  // Joins the run `launch` describes (rendezvous at its master address and port).
  // Throws LaunchError when the rendezvous fails (port in use, master unreachable, timeout).
  static std::shared_ptr<Collectives> connect(const LaunchEnvironment& launch,
                                              std::chrono::milliseconds timeout,
                                              CollectiveBackend backend);
  // With the experiment's cluster.timeout, and cluster.backend resolved for train.device
  // (core/device/compute_device.hpp).
  static std::shared_ptr<Collectives> connect(const LaunchEnvironment& launch,
                                              const ClusterConfig& cluster,
                                              const TrainConfig& train);
  // Thread `rank` of `meeting`'s threads, which stand for a run's processes within this one
  // (`lrmoe replay --processes`, Note [Replay] in docs/notes.md): its collectives run in memory
  // (core/distributed/thread_meeting.hpp), host tensors only.
  static std::shared_ptr<Collectives> join_threads(std::shared_ptr<ThreadMeeting> meeting,
                                                   int64_t rank);
  ~Collectives();
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  int64_t rank() const { return rank_; }
  // This process's index among the run's processes on its host (its GPU: cuda:local_rank).
  int64_t local_rank() const { return local_rank_; }
  int64_t size() const { return size_; }
  bool single() const { return size_ == 1; }

  // In place, over every process.
  void sum(torch::Tensor& tensor);
  void max(torch::Tensor& tensor);
  // Every process's `local` rows ([n_p, ...], n_p may differ) concatenated in process order
  // (the pair order of the plan relies on it: Note [Pair order] in docs/notes.md); `counts`, if
  // given, receives n_p.
  torch::Tensor gather_rows(const torch::Tensor& local, std::vector<int64_t>* counts = nullptr);
  // The same when every process knows every n_p already: one collective instead of two.
  torch::Tensor gather_rows(const torch::Tensor& local, const std::vector<int64_t>& counts);
  // All-to-all-v over rows: `send` holds send_rows[q] rows for process q, in process order;
  // returns recv_rows[q] rows from each process q, in process order. Any dtype; rows travel as
  // bytes.
  torch::Tensor exchange_rows(const torch::Tensor& send, const std::vector<int64_t>& send_rows,
                              const std::vector<int64_t>& recv_rows);
  // Several all-to-all-v of rows in one call (Note [Fused dispatch] in docs/notes.md): message m
  // sends its `rows` ([n_m, ...], in process order, send_rows[q] of them to process q) and
  // receives recv_rows[q] rows from each process q; returns each message's received rows in
  // process order. Messages may differ in dtype and width: what goes to process q is one run of
  // bytes, every message's rows for q, message after message, each part aligned for its dtype
  // (core/distributed/message_layout.hpp).
  struct RowMessage {
    torch::Tensor rows;
    std::vector<int64_t> send_rows;
    std::vector<int64_t> recv_rows;
  };
  std::vector<torch::Tensor> exchange_messages(const std::vector<RowMessage>& messages);
  // exchange_messages in two halves, so that the caller computes while the messages travel
  // (Note [Overlapped expert fetch]): start_exchange_messages issues the exchange, whose wait()
  // returns what exchange_messages returns. Every process starts it where it would call
  // exchange_messages; collectives issued before the wait run after it, in order.
  class PendingMessages {
   public:
    PendingMessages(PendingMessages&&) noexcept;
    PendingMessages& operator=(PendingMessages&&) noexcept;
    ~PendingMessages();
    // Blocks until the exchange is done; later calls return the same tensors.
    std::vector<torch::Tensor> wait();

   private:
    friend class Collectives;
    struct State;
    explicit PendingMessages(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
  };
  PendingMessages start_exchange_messages(const std::vector<RowMessage>& messages);
  // An all-to-all-v of bytes packed already: `send` [bytes, 1] uint8 holds send_bytes[q] bytes
  // for process q, in process order; wait() returns the one tensor of recv_bytes[q] bytes from
  // each process q, in process order, on `send`'s device. With one process, `send` itself.
  PendingMessages start_exchange_bytes(const torch::Tensor& send,
                                       const std::vector<int64_t>& send_bytes,
                                       const std::vector<int64_t>& recv_bytes);
  void barrier();

 private:
  void all_reduce(torch::Tensor& tensor, bool maximum);
  // Issues the all-to-all-v of `send`'s bytes into `s` (several processes).
  void start_bytes(PendingMessages::State& s, const torch::Tensor& send,
                   const std::vector<int64_t>& send_bytes, const std::vector<int64_t>& recv_bytes);

  struct Group;
  std::unique_ptr<Group> group_;
  // Instead of group_, for threads. Only then are collectives marked CollectiveCpuScopes: only
  // threads standing for processes time their plans by CPU (PlanClock::ThreadCpu), and the
  // training path pays no clock reads for it.
  std::shared_ptr<ThreadMeeting> meeting_;
  int64_t rank_ = 0;
  int64_t local_rank_ = 0;
  int64_t size_ = 1;
};

}  // namespace lrmoe
