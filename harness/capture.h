// Capture the first failing step of a LibTorch (C++) training loop as a
// minrepro case: the C++ counterpart of harness/python/minrepro_capture,
// writing the same case directory (docs/method.md, "The first error and its context", "Failure families", "ROCm").
//
//     minrepro::CaptureOptions options;
//     options.out_dir = "crash-case";
//     options.model = scripted_model;          // a torch::jit::Module
//     minrepro::CaptureSession session(options);
//     for (...) {
//       minrepro::CaptureBatch batch{{{"input", x}, {"target", y}}, ids};
//       session.run(step, batch, [&] { ...forward, loss, backward, step... });
//     }
//
// On the first exception of the session, out_dir gets batch.pt (every tensor
// detached, on the CPU, own storage, stride order kept, plus `sample_id`),
// model.pt (the scripted module, on the CPU) and case.yaml (the built-in
// harness with the loss settings, or `command` when no model is given;
// samples, ids, failure.family when certain, and the context). The
// exception is then rethrown; after a device-side assert the process exits
// with kDeviceAssertExitCode instead (its CUDA/HIP context is unusable).
// With neither model nor command, CAPTURE-ERROR.txt says so and
// case.yaml.draft holds the rest. This header includes LibTorch: it is for
// users' training loops, never for the engine.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/script.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace minrepro {

// Exit status after a device-side assert (as the Python capture's).
inline constexpr int kDeviceAssertExitCode = 87;

struct CaptureOptions {
  std::filesystem::path out_dir;
  std::optional<torch::jit::Module> model;  // the model slice, saved as model.pt
  std::vector<std::string> command;         // the trial without a model: argv, one element containing "{batch}"
  std::string loss = "cross_entropy";       // cross_entropy | nll | none
  std::int64_t ignore_index = -100;
  std::string input_key = "input";
  std::string target_key = "target";
  std::vector<std::pair<std::string, std::string>> branches;  // optional branches and their state, for the record
  double timeout_seconds = 60;
  // Where `git rev-parse HEAD` runs; empty: the directory of the source file
  // that created the session (the training code's revision).
  std::filesystem::path source_dir;
};

// One step's batch: named tensors on any device, the dataset's sample ids
// (undefined: positions 0..n-1), and whether it is the loader's last,
// incomplete batch (unset: unknown; see isLastIncompleteBatch).
struct CaptureBatch {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  at::Tensor sample_ids;
  std::optional<bool> last_batch;
};

// Whether batch `index` (from 0) of a loader over `dataset_size` samples in
// batches of `batch_size` is its last one and incomplete.
bool isLastIncompleteBatch(std::int64_t dataset_size, std::int64_t batch_size, std::int64_t index,
                           bool drop_last = false);

struct CaptureInfo {
  std::filesystem::path case_dir;
  std::optional<std::filesystem::path> case_file;   // unset when no trial could be written
  std::optional<std::filesystem::path> error_file;  // CAPTURE-ERROR.txt, when there were problems
  bool device_assert = false;
};

class CaptureSession {
 public:
  // Throws std::invalid_argument for a bad loss name or a command without "{batch}".
  explicit CaptureSession(CaptureOptions options, std::source_location where = std::source_location::current());

  // Runs step_fn() as training step `step` on `batch`. A step that returns
  // becomes the last completed step. The session's first exception writes
  // the case and is rethrown (a device-side assert exits the process);
  // later ones are rethrown untouched.
  template <class Fn>
  auto run(std::int64_t step, const CaptureBatch& batch, Fn&& step_fn) {
    try {
      if constexpr (std::is_void_v<std::invoke_result_t<Fn&>>) {
        step_fn();
        last_completed_ = step;
      } else {
        auto result = step_fn();
        last_completed_ = step;
        return result;
      }
    } catch (...) {
      onFailure(step, batch, std::current_exception());
      throw;
    }
  }

  // Writes the case for `error` at `step` now (what run() does on its first
  // exception), for loops that catch errors themselves.
  CaptureInfo write(std::int64_t step, const CaptureBatch& batch, std::exception_ptr error);

  const std::optional<CaptureInfo>& captured() const { return captured_; }
  std::optional<std::int64_t> lastCompletedStep() const { return last_completed_; }

 private:
  void onFailure(std::int64_t step, const CaptureBatch& batch, std::exception_ptr error);

  CaptureOptions options_;
  std::optional<std::int64_t> last_completed_;
  std::optional<CaptureInfo> captured_;
  bool failed_once_ = false;
};

// The free-function form: session.run(step, batch, step_fn).
template <class Fn>
auto capture(CaptureSession& session, std::int64_t step, const CaptureBatch& batch, Fn&& step_fn) {
  return session.run(step, batch, std::forward<Fn>(step_fn));
}

}  // namespace minrepro
