#pragma once
// Collectives in memory between threads of one process that stand for a run's processes
// (Collectives::join_threads; `lrmoe replay --processes`, Note [Replay] in docs/notes.md). Each
// collective is called by every thread, in the same order, with its own rank; two barriers
// bracket it, so a thread reads the others' tensors only while they wait for it. Host tensors
// only. A thread that does not arrive within the timeout makes the others throw PeerError.

#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace lrmoe {

class ThreadMeeting {
 public:
  ThreadMeeting(int64_t size, std::chrono::milliseconds timeout);

  int64_t size() const { return size_; }

  // In place: every thread's `tensor` (same shape and dtype) summed, or their maximum. Each
  // thread reduces its share of the elements.
  void all_reduce(int64_t rank, torch::Tensor& tensor, bool maximum);
  // Every thread's `local` rows ([n_p, ...], n_p may differ) concatenated in rank order.
  torch::Tensor gather_rows(int64_t rank, const torch::Tensor& local);
  // All-to-all-v of bytes: `send` [bytes, 1] uint8 holds send_bytes[q] bytes for thread q, in
  // order; returns recv_bytes[q] bytes from each thread q, in order, as [bytes, 1] uint8.
  torch::Tensor exchange_bytes(int64_t rank, const torch::Tensor& send,
                               const std::vector<int64_t>& send_bytes,
                               const std::vector<int64_t>& recv_bytes);
  void barrier();

 private:
  int64_t size_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable all_here_;
  int64_t arrived_ = 0;
  uint64_t generation_ = 0;
  // What each thread put up for the collective under way, read by the others between its two
  // barriers.
  std::vector<torch::Tensor> posted_;
  std::vector<const std::vector<int64_t>*> posted_counts_;
  torch::Tensor shared_;  // all_reduce's result, made by thread 0
};

}  // namespace lrmoe
