// ThreadMeeting (core/distributed/thread_meeting.hpp): the in-memory collectives of threads that
// stand for processes in `lrmoe replay --processes`.

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

#include "core/distributed/collectives.hpp"
#include "core/distributed/thread_meeting.hpp"

using namespace lrmoe;

TEST_CASE("Threads meeting in memory sum their tensors in place, int64 and int32 counts alike",
          "[collectives]") {
  // int32: the threshold search's histograms (core/pipeline/quota_threshold_search.hpp).
  for (const torch::ScalarType type : {torch::kInt64, torch::kInt32}) {
    ThreadMeeting meeting(3, std::chrono::milliseconds(10000));
    std::vector<torch::Tensor> tensors;
    for (int64_t rank = 0; rank < 3; ++rank) tensors.push_back(torch::arange(5, type) * (rank + 1));
    std::vector<std::thread> threads;
    for (int64_t rank = 0; rank < 3; ++rank)
      threads.emplace_back([&, rank] {
        meeting.all_reduce(rank, tensors[static_cast<std::size_t>(rank)], /*maximum=*/false);
      });
    for (std::thread& thread : threads) thread.join();
    for (const torch::Tensor& tensor : tensors) {
      CHECK(tensor.scalar_type() == type);
      CHECK(tensor.equal(torch::arange(5, type) * 6));
    }
  }
}

TEST_CASE("A thread that gave up waiting leaves the barrier: a late one waits for it too",
          "[collectives]") {
  ThreadMeeting meeting(2, std::chrono::milliseconds(50));
  // The first thread times out alone; the second, arriving after, must not pass on the first's
  // arrival (it would go on to read what the first posted and has freed).
  CHECK_THROWS_AS(meeting.barrier(), PeerError);
  CHECK_THROWS_AS(meeting.barrier(), PeerError);
}
