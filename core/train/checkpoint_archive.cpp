#include "core/train/checkpoint_archive.hpp"

#include <fmt/format.h>

#include <chrono>

#include "core/system/one_line.hpp"

namespace lrmoe {
namespace {

std::string joined_names(const NamedTensors& tensors) {
  std::string names;
  for (const auto& [name, tensor] : tensors) names += name + "\n";
  return names;
}

// Tensors under their index, their names in one string (archive keys are not dotted paths).
void write_named(torch::serialize::OutputArchive& archive, const NamedTensors& tensors) {
  archive.write("names", c10::IValue(joined_names(tensors)));
  for (std::size_t i = 0; i < tensors.size(); ++i)
    archive.write(fmt::format("tensor_{}", i), tensors[i].second.detach());
}

// Copies the archive's tensors into `into`, in place; throws CheckpointError naming `file` and
// the tensor when the names or a shape differ.
void read_named(torch::serialize::InputArchive& archive, const NamedTensors& into,
                const std::filesystem::path& file) {
  if (read_value(archive, "names").toStringRef() != joined_names(into)) {
    throw CheckpointError(fmt::format(
        "{}: holds other tensors than this model's {} (another model or expert shard); resume "
        "with the run's own experiment and number of processes",
        file.string(), into.size()));
  }
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < into.size(); ++i) {
    torch::Tensor saved;
    archive.read(fmt::format("tensor_{}", i), saved);
    if (saved.sizes() != into[i].second.sizes()) {
      throw CheckpointError(fmt::format("{}: tensor {} has shape {}, this model's is {}",
                                        file.string(), into[i].first, c10::str(saved.sizes()),
                                        c10::str(into[i].second.sizes())));
    }
    into[i].second.copy_(saved);
  }
}

}  // namespace

c10::IValue read_value(torch::serialize::InputArchive& archive, const std::string& key) {
  c10::IValue value;
  archive.read(key, value);
  return value;
}

torch::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor tensor;
  archive.read(key, tensor);
  return tensor.to(torch::kCPU);
}

NamedTensors read_named_tensors(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::serialize::InputArchive named;
  archive.read(key, named);
  const std::string names = read_value(named, "names").toStringRef();
  NamedTensors tensors;
  std::size_t start = 0;
  for (std::size_t end = names.find('\n'); end != std::string::npos;
       start = end + 1, end = names.find('\n', start)) {
    tensors.emplace_back(names.substr(start, end - start),
                         read_tensor(named, fmt::format("tensor_{}", tensors.size())));
  }
  return tensors;
}

void write_state(torch::serialize::OutputArchive& archive, const std::string& key,
                 const NamedTensors& tensors, const torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive named;
  write_named(named, tensors);
  archive.write(key, named);
  torch::serialize::OutputArchive state;
  optimizer.save(state);
  archive.write("optimizer", state);
}

void read_state(torch::serialize::InputArchive& archive, const std::string& key,
                const NamedTensors& into, torch::optim::Optimizer& optimizer,
                const std::filesystem::path& file) {
  torch::serialize::InputArchive named;
  archive.read(key, named);
  read_named(named, into, file);
  torch::serialize::InputArchive state;
  archive.read("optimizer", state);
  optimizer.load(state);
}

void write_identity(torch::serialize::OutputArchive& archive, int64_t step,
                    const CheckpointIdentity& identity) {
  archive.write("format", c10::IValue(kCheckpointFormat));
  archive.write("step", c10::IValue(step));
  archive.write("experiment_sha256", c10::IValue(identity.experiment_sha256));
  archive.write("code_version", c10::IValue(identity.code_version));
}

int64_t read_identity(torch::serialize::InputArchive& archive, const std::filesystem::path& file,
                      const CheckpointIdentity& expected) {
  const int64_t format = read_value(archive, "format").toInt();
  if (format != kCheckpointFormat) {
    throw CheckpointError(fmt::format(
        "{}: checkpoint format {}, this build reads format {}; resume it with the build that "
        "wrote it",
        file.string(), format, kCheckpointFormat));
  }
  check_checkpoint_identity(file,
                            {read_value(archive, "experiment_sha256").toStringRef(),
                             read_value(archive, "code_version").toStringRef()},
                            expected);
  return read_value(archive, "step").toInt();
}

LoadSeconds load_verified(torch::serialize::InputArchive& archive,
                          const std::filesystem::path& file, const torch::Device& device) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  verify_checkpoint_file(file);
  const auto verified = Clock::now();
  try {
    archive.load_from(file.string(), device);
  } catch (...) {
    rethrow_as_unreadable(file);
  }
  const auto loaded = Clock::now();
  return {std::chrono::duration<double>(verified - start).count(),
          std::chrono::duration<double>(loaded - verified).count()};
}

CheckpointError unreadable(const std::filesystem::path& file, const std::string& why) {
  return CheckpointError(fmt::format(
      "{}: cannot read this checkpoint ({}); it is damaged or of another model: resume from an "
      "earlier one by removing it",
      file.string(), one_line(why)));
}

void rethrow_as_unreadable(const std::filesystem::path& file) {
  try {
    throw;
  } catch (const CheckpointError&) {
    throw;
  } catch (const c10::Error& error) {
    throw unreadable(file, error.what_without_backtrace());
  } catch (const std::exception& error) {
    throw unreadable(file, error.what());
  }
}

}  // namespace lrmoe
