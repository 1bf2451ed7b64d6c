// A real LibTorch training loop with one mislabelled sample, wrapped in
// minrepro::CaptureSession (harness/capture.h); the C++ twin of
// train_loop.py.
//
// Usage: train_loop CASE_DIR [MODE]
// MODE: "plain" (DataLoader over 256 samples, batch 32, sample 137 (id 9137)
// has target 4 in a 4-class problem -> c10::IndexError at step 4),
// "last-batch" (250 samples, the bad one is 245: the last, incomplete batch
// fails), "command" (no scripted model: the trial is a user command),
// "nothing" (neither model nor command), "device-assert" (a simulated CUDA
// device-side assert at step 2).
#include <torch/torch.h>

#include <iostream>

#include "harness/capture.h"

namespace {

constexpr std::int64_t kFeatures = 8, kClasses = 4, kBatch = 32;

struct Sample {
  at::Tensor x, y, id;
};

// A map-style dataset, as a user's would be: features, a class, a sample id.
class Synthetic : public torch::data::datasets::Dataset<Synthetic, Sample> {
 public:
  Synthetic(std::int64_t n, std::int64_t bad) : n_(n) {
    torch::manual_seed(0);
    x_ = torch::randn({n, kFeatures});
    y_ = torch::randint(0, kClasses, {n}, torch::kLong);
    y_[bad] = 4;  // the mislabelled sample: a fifth class
    ids_ = torch::arange(n, torch::kLong) + 9000;
  }
  Sample get(size_t i) override {
    const auto k = static_cast<std::int64_t>(i);
    return {x_[k], y_[k], ids_[k]};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(n_); }

 private:
  std::int64_t n_;
  at::Tensor x_, y_, ids_;
};

// The classifier as a TorchScript module built in C++ (what a user passes
// to the capture so the case gets model.pt).
torch::jit::Module classifier() {
  torch::jit::Module m("Classifier");
  torch::manual_seed(1);
  m.register_parameter("w1", torch::randn({16, kFeatures}) * 0.3, false);
  m.register_parameter("b1", torch::zeros({16}), false);
  m.register_parameter("w2", torch::randn({kClasses, 16}) * 0.3, false);
  m.register_parameter("b2", torch::zeros({kClasses}), false);
  m.define(
      "def forward(self, x):\n"
      "    h = torch.relu(torch.linear(x, self.w1, self.b1))\n"
      "    return torch.linear(h, self.w2, self.b2)\n");
  for (at::Tensor p : m.parameters()) p.set_requires_grad(true);
  return m;
}

int train(const std::string& out, const std::string& mode) {
  const std::int64_t n = mode == "last-batch" ? 250 : 256;
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Synthetic(n, mode == "last-batch" ? 245 : 137), torch::data::DataLoaderOptions().batch_size(kBatch));
  torch::jit::Module model = classifier();
  std::vector<at::Tensor> params;
  for (const at::Tensor& p : model.parameters()) params.push_back(p);
  torch::optim::SGD opt(params, torch::optim::SGDOptions(0.1));

  minrepro::CaptureOptions options;
  options.out_dir = out;
  if (mode != "command" && mode != "nothing") options.model = model;
  if (mode == "command") options.command = {"/usr/bin/python3", "{case_dir}/step.py", "{batch}"};
  options.branches = {{"augment", "off"}};
  minrepro::CaptureSession session(options);

  std::int64_t step = 0;
  for (std::vector<Sample>& samples : *loader) {
    std::vector<at::Tensor> xs, ys, ids;
    for (const Sample& s : samples) xs.push_back(s.x), ys.push_back(s.y), ids.push_back(s.id);
    const at::Tensor x = torch::stack(xs), y = torch::stack(ys);
    const minrepro::CaptureBatch batch{
        {{"input", x}, {"target", y}}, torch::stack(ids), minrepro::isLastIncompleteBatch(n, kBatch, step)};
    session.run(step, batch, [&] {
      if (mode == "device-assert" && step == 2)
        TORCH_CHECK(false,
                    "CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously "
                    "reported at some other API call");
      opt.zero_grad();
      const at::Tensor logits = model.forward({x}).toTensor();
      const at::Tensor loss = torch::nn::functional::cross_entropy(
          logits, y, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
      loss.backward();
      opt.step();
    });
    std::cout << "step " << step << " ok" << std::endl;
    ++step;
  }
  std::cout << "training finished" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: train_loop CASE_DIR [plain|last-batch|command|nothing|device-assert]\n";
    return 2;
  }
  try {
    return train(argv[1], argc > 2 ? argv[2] : "plain");
  } catch (const c10::Error& e) {
    std::cerr << "error: " << e.what_without_backtrace() << "\n";
    return 1;
  }
}
