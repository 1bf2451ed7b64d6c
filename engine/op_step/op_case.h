// The failing call's inputs as a case of their own, which the same engine
// shrinks (engine/op_step/op_step.h): the axis its tensors share, then
// their values. `compare` builds the same case for an archive's call.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "core/failure_signature.h"
#include "core/op_call.h"

namespace minrepro {

// How the call's inputs are reduced: the axis each tensor is cut along, and
// whether there is anything to cut. Cut: the length that most tensors have
// as their first axis, when two or more do (the batch of a loss's input and
// target; CTC's targets and lengths, with log_probs [T, N, C] cut along N),
// each tensor along its first axis of that length; never when a tensor has
// that length on two axes (which one is the batch?) or a non-tensor
// argument names it (a view's shape: the cut would make a size error of its
// own). Otherwise only the values pass runs, on one axis that carries the
// case (of length 1 where one exists). Empty `axes` when every tensor is a
// scalar.
struct OpCaseAxes {
  std::map<std::string, int> axes;
  bool cut = false;
};
OpCaseAxes sharedSampleAxes(const std::vector<OpTensor>& tensors, const std::vector<std::string>& args = {});

// case.yaml for reducing the call's inputs: repro_op.py run on each
// candidate; the samples pass when there is an axis to cut, then values;
// flaky handling only for a `flaky` failure.
std::string renderOpCase(const std::string& python, const OpCaseAxes& axes, const FailureSignature& signature,
                         std::chrono::milliseconds timeout, bool flaky);

}  // namespace minrepro
