// The built-in harness's transform chain (case.yaml trial.harness.transforms):
// each step changes one batch tensor before the model runs. minrepro passes
// the active steps to minrepro-trial as "--transform SPEC"; the report's
// repro.py and repro.cpp apply the same steps with the same seeds.
// LibTorch inside: harness files only.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/case_config.h"
#include "harness/batch_io.h"

namespace minrepro {

struct TransformStep {
  std::string type, tensor;
  std::map<std::string, std::string> params;  // includes "seed" for noise and crop
};

// "type=pad;tensor=tokens;axis=1;length=520;value=0" and back. Noise and
// crop carry the step's seed (the case's seed plus the step's declared
// position unless given), so switching one step off does not change
// another's random numbers.
std::string transformArg(const TransformSpec& spec);
TransformStep parseTransformArg(const std::string& arg);  // throws std::invalid_argument

// Applies one step in place; throws std::invalid_argument on a bad step
// (unknown tensor, axis out of range, a float transform on integers).
void applyTransform(NamedTensors& batch, const TransformStep& step);

}  // namespace minrepro
