// What a batch file says about itself, for a start without a samples
// section: `minrepro shrink --batch saved.pt -- python step.py {batch}`,
// `minrepro init`, and a case.yaml without `samples:` (what capture writes).
// One inference for all of them, so that every way in reduces the same
// batch the same way.
//
// The rules, each said in the notes when it applies:
// - samples: the batch size is the count most entries agree on: dimension 0
//   of the tensors outside lists, and the length of each list or tuple whose
//   entries look alike (tensors of one dtype and rank, dicts with the same
//   keys, strings or numbers). Every tensor with that size along dimension 0
//   is a sample tensor; one with it along dimension 1 only is sequence-first
//   ([T, B, ...], sample axis 1); a list of that length whose entries are
//   not themselves batches is one entry per sample (per-image boxes, file
//   names). Everything else is kept whole, each with its reason.
// - ids: a 1-D integer per-sample tensor named like sample_id, with unique values.
// - lengths: a 1-D integer per-sample tensor is a lengths tensor only when
//   some tensor gets a sequence axis through it: an axis as long as its
//   largest value, every position past each sample's length holding one
//   padding value. Small per-sample integers (camera ids, classes) stay
//   sample tensors.
// - a mask: without a lengths tensor, a [B, T] tensor of 0/1 or bool whose
//   rows are a prefix of ones (an attention mask) gives the lengths.
// - without either, integer [B, T] tensors (not one-hot) and long float
//   sequences (an axis of 64 or more) get a window the lengths pass may cut,
//   padding 0; short float axes are features or channels.
// - refused, with what to write instead: packed sequences (cu_seqlens) and
//   graph batches (a batch vector), whose samples are ranges of one axis.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/case_config.h"

namespace minrepro {

struct InferredTensor {
  std::string name;  // its path in the batch
  std::string dtype;
  std::vector<std::int64_t> shape;
  // "sample", "ids", "lengths", "mask", "list entry" (in a per-sample
  // list), or "whole" (kept whole in every candidate, `reason` says why).
  std::string role;
  std::string reason;
};

struct InferredCase {
  std::vector<InferredTensor> tensors;  // in the batch's order
  std::int64_t samples = 0;
  std::vector<SampleAxis> sample_axes;    // every sample tensor, ids and lengths not included
  std::vector<std::string> sample_lists;  // paths of per-sample lists and tuples
  std::string ids;                        // "" when none was found
  std::string lengths;                    // "" when none was found
  std::string mask;                       // "" when none was found (or a lengths tensor was)
  std::vector<SequenceTensor> sequence;   // axis and padding of each
  std::vector<std::string> kept_values;   // non-tensor leaves kept as they are
  std::vector<std::string> doubts;        // what else a choice could have been
  // Per-sample lengths the sequence is not cut by (a CTC batch's target
  // lengths beside its frame lengths): the values pass leaves them as they
  // are, so a kept sample's length still matches its values.
  std::vector<std::string> values_kept;
};

// Throws BadInputError when the file cannot be read, holds no tensor with a
// sample axis, or is a layout whose samples cannot be cut (one line saying
// what to save or write instead).
InferredCase inferCase(const std::filesystem::path& batch);

// The sentences `init` prints and writes above the case, and the run logs:
// made from the same fields the case is written from.
std::vector<std::string> describeInference(const InferredCase& inferred);

// The inferred samples (and, unless the case has a sequence section, the
// sequence axes) put into `config`, which has no samples section.
void applyInference(const InferredCase& inferred, CaseConfig& config);

// A case without a samples section made whole from its batch (inferCase,
// applyInference; the notes in config.inference_notes); others unchanged.
// Every command that opens a case's batch calls it first.
void completeCase(CaseConfig& config);

}  // namespace minrepro
