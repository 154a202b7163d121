#pragma once
// CPU threads for training.
//
// LibTorch parallelises its own operators over an intra-op pool, and OpenBLAS runs its own
// threads inside every GEMM. With both at one thread per core the two pools fight over the same
// cores; on 2 cores that measured 1.8x slower per step than one pool. So LibTorch gets the cores
// and each OpenBLAS call runs on the calling thread (`lrmoe bench --set train.threads=N` shows
// the effect).

#include <cstdint>

namespace lrmoe {

struct ThreadSetting {
  int intra_op = 1;          // LibTorch's intra-op threads
  bool blas_single = false;  // OpenBLAS was told to use one thread per call
};

// `requested` intra-op threads, or one per core when 0. More than the machine's cores is an
// std::invalid_argument naming train.threads.
ThreadSetting configure_threads(int64_t requested);

// Threads OpenBLAS may use inside one GEMM; false when the BLAS is not OpenBLAS.
bool set_blas_threads(int threads);

}  // namespace lrmoe
