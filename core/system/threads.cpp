#include "core/system/threads.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include <torch/torch.h>

namespace lrmoe {

ThreadSetting configure_threads(int64_t requested) {
  ThreadSetting setting;
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  // Threads beyond the cores wait on each other at every parallel operator; at hundreds of them
  // a step takes minutes and the run looks hung.
  if (requested > cores) {
    throw std::invalid_argument(fmt::format(
        "train.threads = {} is more than this machine's {} cores; set it to at most {}, or to 0 "
        "for one per core",
        requested, cores, cores));
  }
  const int threads = static_cast<int>(requested > 0 ? requested : cores);
  torch::set_num_threads(threads);
  setting.intra_op = torch::get_num_threads();
  setting.blas_single = set_blas_threads(1);
  return setting;
}

bool set_blas_threads(int threads) {
  // Looked up at run time: only OpenBLAS has it, and the build does not link OpenBLAS directly.
  using SetThreads = void (*)(int);
  auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set) set(threads);
  return set != nullptr;
}

}  // namespace lrmoe
