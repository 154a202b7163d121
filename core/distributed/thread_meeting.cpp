#include "core/distributed/thread_meeting.hpp"

#include <fmt/format.h>

#include <numeric>
#include <stdexcept>

#include "core/distributed/collectives.hpp"

namespace lrmoe {
namespace {

template <typename T>
void reduce_into(T* out, const std::vector<torch::Tensor>& inputs, int64_t first, int64_t last,
                 bool maximum) {
  const T* in = inputs.front().data_ptr<T>();
  std::copy(in + first, in + last, out + first);
  for (std::size_t q = 1; q < inputs.size(); ++q) {
    in = inputs[q].data_ptr<T>();
    for (int64_t i = first; i < last; ++i)
      out[i] = maximum ? std::max(out[i], in[i]) : out[i] + in[i];
  }
}

}  // namespace

ThreadMeeting::ThreadMeeting(int64_t size, std::chrono::milliseconds timeout)
    : size_(size),
      timeout_(timeout),
      posted_(static_cast<std::size_t>(size)),
      posted_counts_(static_cast<std::size_t>(size), nullptr) {}

void ThreadMeeting::barrier() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t generation = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    all_here_.notify_all();
    return;
  }
  if (!all_here_.wait_for(lock, timeout_, [&] { return generation_ != generation; })) {
    // This thread leaves: a late one must not complete the barrier on its arrival and go on to
    // read what it posted, which its unwinding frees.
    --arrived_;
    throw PeerError(fmt::format(
        "a collective across the {} threads standing for processes failed: another thread "
        "failed or did not arrive within cluster.timeout ({} ms)",
        size_, timeout_.count()));
  }
}

void ThreadMeeting::all_reduce(int64_t rank, torch::Tensor& tensor, bool maximum) {
  const torch::Tensor input = tensor.contiguous().cpu().reshape({-1});
  posted_[static_cast<std::size_t>(rank)] = input;
  if (rank == 0) shared_ = torch::empty_like(input);
  barrier();
  const torch::Tensor result = shared_;
  const int64_t n = input.numel();
  const int64_t first = n * rank / size_, last = n * (rank + 1) / size_;
  switch (input.scalar_type()) {
    case torch::kInt64:
      reduce_into(result.data_ptr<int64_t>(), posted_, first, last, maximum);
      break;
    case torch::kInt32:
      reduce_into(result.data_ptr<int32_t>(), posted_, first, last, maximum);
      break;
    case torch::kFloat32:
      reduce_into(result.data_ptr<float>(), posted_, first, last, maximum);
      break;
    case torch::kFloat64:
      reduce_into(result.data_ptr<double>(), posted_, first, last, maximum);
      break;
    default:
      throw std::invalid_argument(fmt::format("thread collectives: all-reduce of {} is not built",
                                              c10::toString(input.scalar_type())));
  }
  barrier();
  tensor.copy_(result.view(tensor.sizes()));
}

torch::Tensor ThreadMeeting::gather_rows(int64_t rank, const torch::Tensor& local) {
  posted_[static_cast<std::size_t>(rank)] = local.contiguous().cpu();
  barrier();
  const torch::Tensor gathered = torch::cat(posted_, 0).to(local.device());
  barrier();
  return gathered;
}

torch::Tensor ThreadMeeting::exchange_bytes(int64_t rank, const torch::Tensor& send,
                                            const std::vector<int64_t>& send_bytes,
                                            const std::vector<int64_t>& recv_bytes) {
  const auto me = static_cast<std::size_t>(rank);
  posted_[me] = send.contiguous().cpu();
  posted_counts_[me] = &send_bytes;
  barrier();
  const int64_t received = std::accumulate(recv_bytes.begin(), recv_bytes.end(), int64_t{0});
  torch::Tensor arrived = torch::empty({received, 1}, torch::kUInt8);
  uint8_t* out = arrived.data_ptr<uint8_t>();
  for (std::size_t q = 0; q < posted_.size(); ++q) {
    const std::vector<int64_t>& sent = *posted_counts_[q];
    if (sent[me] != recv_bytes[q]) {
      throw std::logic_error(
          fmt::format("thread collectives: thread {} sends {} bytes to thread "
                      "{}, which expects {}",
                      q, sent[me], rank, recv_bytes[q]));
    }
    const int64_t offset = std::accumulate(sent.begin(), sent.begin() + rank, int64_t{0});
    const uint8_t* in = posted_[q].data_ptr<uint8_t>() + offset;
    out = std::copy(in, in + recv_bytes[q], out);
  }
  barrier();
  return arrived.to(send.device());
}

}  // namespace lrmoe
