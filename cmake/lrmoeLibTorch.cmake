# Finds LibTorch and decides what the build does with it (Note [LibTorch versions] in
# docs/notes.md). Included once by the top-level CMakeLists.txt.
#
# LRMOE_TORCH_PYTHON: a Python interpreter whose `torch` package provides LibTorch (PyPI's
# PyTorch 2.x, a CUDA build). Empty: the LibTorch CMake finds on its own (Debian's libtorch-dev).
# `scripts/setup.sh --cuda` and the `cuda` preset set it to the virtual environment in
# build-cuda/; scripts/gpu-check.sh sets it to the GPU machine's own python3.

set(LRMOE_TORCH_PYTHON "" CACHE STRING
    "Python (a path, or a command on PATH) whose torch package provides LibTorch (empty: the system's LibTorch)")
set(LRMOE_TORCH_ROOT "")  # the torch package's folder; lrmoeConfig.cmake hands it to plugins

if(LRMOE_TORCH_PYTHON)
  execute_process(
    COMMAND "${LRMOE_TORCH_PYTHON}" -c "import os, torch; print(os.path.dirname(torch.__file__))"
    OUTPUT_VARIABLE lrmoe_torch_root OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE lrmoe_torch_found ERROR_VARIABLE lrmoe_torch_error)
  if(NOT lrmoe_torch_found EQUAL 0)
    message(FATAL_ERROR "LRMOE_TORCH_PYTHON=${LRMOE_TORCH_PYTHON} cannot import torch "
                        "(${lrmoe_torch_error}); run `bash scripts/setup.sh --cuda` to install it "
                        "into build-cuda/venv, or name a Python that has PyTorch")
  endif()
  # The package's root first, so that its libraries win over a system LibTorch's: TorchConfig
  # searches lib/ under each prefix before the system folders only when the prefix names it.
  set(LRMOE_TORCH_ROOT "${lrmoe_torch_root}")
  list(PREPEND CMAKE_PREFIX_PATH "${lrmoe_torch_root}")
  set(Torch_DIR "${lrmoe_torch_root}/share/cmake/Torch" CACHE PATH "" FORCE)
  # The wheel's libtorch.so and libtorch_cpu.so export their own copies of std::filesystem
  # (linked statically from an older libstdc++), whose weak references are unresolved here: a
  # program that binds std::filesystem::remove_all to them crashes. Naming libstdc++ first among
  # every binary's libraries makes the system's copy the one found first.
  add_link_options("LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state")
  # An installed lrmoe finds the wheel's libraries where it was built against them.
  list(APPEND CMAKE_INSTALL_RPATH "${lrmoe_torch_root}/lib")
  set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
  # The GPU architectures to compile for when no GPU is visible at configure time; GPU machines
  # detect their own.
  if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(ENV{TORCH_CUDA_ARCH_LIST} "8.0;9.0")
  endif()
endif()

find_package(Torch REQUIRED)
message(STATUS "lrmoe: LibTorch ${Torch_VERSION} from ${Torch_DIR}")

# CUDA code (device clocks, the caching allocator's peaks, NCCL) is compiled whenever the
# LibTorch found has CUDA; it then runs on the CPU too where no GPU is visible.
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
  set(LRMOE_WITH_CUDA ON)
else()
  set(LRMOE_WITH_CUDA OFF)
endif()
message(STATUS "lrmoe: CUDA code ${LRMOE_WITH_CUDA}")
option(LRMOE_WITH_NCCL "c10d NCCL backend for multi-process runs (needs a CUDA LibTorch)"
       ${LRMOE_WITH_CUDA})
if(LRMOE_WITH_NCCL AND NOT LRMOE_WITH_CUDA)
  message(FATAL_ERROR "LRMOE_WITH_NCCL=ON needs a CUDA LibTorch; this one (${Torch_DIR}) is "
                      "CPU-only: configure with -DLRMOE_TORCH_PYTHON=... (scripts/setup.sh --cuda)")
endif()

# PyTorch 2.x ships its own fmt headers (fmt 12) inside its include folder, which comes before
# the system's on the command line; Debian's spdlog and libfmt are fmt 9. Compiling against one
# and linking the other fails, so the system's fmt is put in front, through a folder holding only
# a link to it (in front of the system folder itself would change nothing: GCC keeps system
# folders last). LibTorch's own headers compile with either.
function(lrmoe_prefer_system_fmt)
  get_target_property(fmt_includes fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT fmt_includes)
    set(fmt_includes /usr/include)
  endif()
  foreach(torch_include IN LISTS TORCH_INCLUDE_DIRS)
    if(EXISTS "${torch_include}/fmt/format.h")
      foreach(candidate IN LISTS fmt_includes)
        if(EXISTS "${candidate}/fmt/format.h")
          set(front "${CMAKE_BINARY_DIR}/system-fmt")
          file(MAKE_DIRECTORY "${front}")
          file(CREATE_LINK "${candidate}/fmt" "${front}/fmt" SYMBOLIC)
          include_directories(BEFORE SYSTEM "${front}")
          message(STATUS "lrmoe: fmt from ${candidate}, in front of LibTorch's own")
          return()
        endif()
      endforeach()
    endif()
  endforeach()
endfunction()
