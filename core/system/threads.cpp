#include "core/system/threads.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <thread>

#include <torch/torch.h>

namespace lrmoe {

ThreadSetting configure_threads(int64_t requested) {
  ThreadSetting setting;
  const int threads = requested > 0
                          ? static_cast<int>(requested)
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
