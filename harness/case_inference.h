// What a batch file says about itself, for a start without case.yaml.
//
// `minrepro shrink --batch saved.pt -- python step.py {batch}` and
// `minrepro init` read the batch and infer what a user would otherwise
// write by hand: which tensors hold samples (dimension 0 of the most common
// size), which 1-D integer tensor holds sample ids (a name like sample_id
// or ids, and unique values), which holds lengths (values within a
// dimension 1 that padded tensors share, the longest at it), the sequence
// axis of each padded tensor and the value its padding holds. Every choice
// is said in `notes`, and an ambiguous one says what else it could be, so
// that the case written from it can be read and edited. LibTorch-free
// header; the implementation reads the batch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace minrepro {

struct InferredTensor {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
};

struct InferredCase {
  std::vector<InferredTensor> tensors;        // in the batch's order
  std::int64_t samples = 0;                   // the sample count
  std::vector<std::string> sample_tensors;    // sample axis 0
  std::string ids;                            // "" when none was found
  std::string lengths;                        // "" when none was found
  std::vector<std::string> sequence_tensors;  // sequence axis 1
  std::map<std::string, double> padding;      // of each sequence tensor
  std::vector<std::string> notes;             // what was inferred and what is ambiguous, one sentence each
};

// Throws BadInputError when the file is not a dict of tensors or holds no
// tensor with a sample axis.
InferredCase inferCase(const std::filesystem::path& batch);

}  // namespace minrepro
