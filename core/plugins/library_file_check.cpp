#include "core/plugins/library_file_check.hpp"

#include <elf.h>
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/plugins/plugin_catalog.hpp"

namespace lrmoe {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kThisMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kThisMachine = EM_AARCH64;
#else
#error "set the ELF machine of this architecture"
#endif

[[noreturn]] void refuse(const std::filesystem::path& path, const std::string& why) {
  throw PluginError(fmt::format(
      "{}: not a loadable plugin library ({}); rebuild it, or remove it from the plugin folder",
      path.string(), why));
}

// `count` records of `size` bytes at `offset` lie within a file of `file_size` bytes (no
// overflow: every factor is at most 2^32 before the sum).
bool within(uint64_t offset, uint64_t count, uint64_t size, uint64_t file_size) {
  return offset <= file_size && count * size <= file_size - offset;
}

}  // namespace

void check_library_file(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) refuse(path, "not a regular file");
  const uint64_t file_size = std::filesystem::file_size(path, error);
  if (error) refuse(path, "its size cannot be read: " + error.message());
  std::ifstream in(path, std::ios::binary);
  auto read = [&](uint64_t offset, void* into, uint64_t bytes) {
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(static_cast<char*>(into), static_cast<std::streamsize>(bytes));
    if (!in) refuse(path, "it cannot be read");
  };

  Elf64_Ehdr header{};
  if (file_size < sizeof header)
    refuse(path, fmt::format("{} bytes, too short for ELF", file_size));
  read(0, &header, sizeof header);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) refuse(path, "not an ELF file");
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB ||
      header.e_machine != kThisMachine) {
    refuse(path, "built for another machine");
  }
  if (header.e_type != ET_DYN) refuse(path, "an ELF file but not a shared library");
  if (header.e_phentsize != sizeof(Elf64_Phdr) ||
      !within(header.e_phoff, header.e_phnum, sizeof(Elf64_Phdr), file_size)) {
    refuse(path, "its program headers lie outside the file: truncated?");
  }
  if (header.e_shnum > 0 &&
      (header.e_shentsize != sizeof(Elf64_Shdr) ||
       !within(header.e_shoff, header.e_shnum, sizeof(Elf64_Shdr), file_size))) {
    refuse(path,
           fmt::format("{} bytes, shorter than its section headers say: truncated?", file_size));
  }
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  read(header.e_phoff, segments.data(), segments.size() * sizeof(Elf64_Phdr));
  for (const Elf64_Phdr& segment : segments) {
    if (segment.p_type == PT_LOAD && !within(segment.p_offset, 1, segment.p_filesz, file_size)) {
      refuse(path,
             fmt::format("{} bytes, shorter than its loaded segments say: truncated?", file_size));
    }
  }
}

}  // namespace lrmoe
