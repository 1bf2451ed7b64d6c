// The containers of a batch file: the dicts, lists and tuples torch.save
// wrote around the tensors (what a DataLoader yields, kept as it was), and
// the leaves that are not tensors (numbers, strings, None).
//
// minrepro reduces tensors by name; a nested batch names each leaf by its
// path from the root ("image", "[1]", "targets[3].boxes"), so that a plain
// dict of tensors keeps the names it always had. A candidate is written
// back into the same containers with the same types, so the user's step
// runs on it unchanged (`x, y = torch.load(path)`). A list or tuple that
// holds one entry per sample (per-image boxes, a list of file names) is
// cut like a tensor's sample axis: a candidate keeps the entries of its
// samples, in order. This header includes LibTorch.
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace minrepro {

// The path of the root itself (a batch that is one tensor, or a list of
// per-sample entries at the top).
inline constexpr const char* kRootPath = ".";

struct BatchNode {
  enum class Kind { Tensor, Value, Dict, List, Tuple };
  Kind kind = Kind::Value;
  std::string path;               // kRootPath for the root
  std::size_t tensor = 0;         // Tensor: its index among the batch's tensors
  c10::IValue value;              // Value: the leaf as read
  std::vector<c10::IValue> keys;  // Dict: each child's key, in the file's order
  std::vector<BatchNode> children;
  bool per_sample = false;  // List or Tuple: child i belongs to sample i
};

std::string kindName(BatchNode::Kind kind);  // "dict", "list", ...

// The tree of a value read from a file, its tensors appended to `tensors`
// (and their paths to `names`) in the order a depth-first walk meets them.
// Throws std::invalid_argument naming the path of a value minrepro cannot
// write back (an object of a class, a storage without a tensor).
BatchNode flattenBatch(const c10::IValue& value, std::vector<std::string>& names, std::vector<at::Tensor>& tensors);

// The value to write: `root`'s containers with the given tensors (by
// index) and leaves, per-sample containers holding only the entries of
// `kept` samples (ascending; nullopt: all of them).
c10::IValue rebuildBatch(const BatchNode& root, const std::vector<at::Tensor>& tensors,
                         const std::optional<std::vector<std::int64_t>>& kept);

// The node at `path`, or null.
// A field of a per-sample list's records named for every entry at once:
// "[1][*].image_id" (samples.ids may name one); `entryPath` gives entry
// `i`'s own path ("[1][3].image_id"), "" when `pattern` holds no "[*]".
inline std::string entryPath(const std::string& pattern, std::int64_t i) {
  const std::size_t star = pattern.find("[*]");
  if (star == std::string::npos) return "";
  return pattern.substr(0, star) + "[" + std::to_string(i) + "]" + pattern.substr(star + 3);
}

const BatchNode* findNode(const BatchNode& root, const std::string& path);
BatchNode* findNode(BatchNode& root, const std::string& path);

// For each tensor (by index), the sample whose entry of a per-sample
// container holds it; -1 for a tensor outside every such container.
std::vector<std::int64_t> tensorOwners(const BatchNode& root, std::size_t tensor_count);

// The entries that `sample` holds in the per-sample lists (the list's path,
// the entry as Python would print it), tensors by dtype and shape only ("meta: {'filename':
// 'scene_00203.png', 'orig_size': (346, 351)}"), each cut to `max_chars`.
// Entries that hold nothing but tensors are left out: the reports' tables
// describe those. What names a sample for the user (a file name, a
// caption) often lies there and nowhere else.
std::vector<std::pair<std::string, std::string>> sampleEntryTexts(const BatchNode& root,
                                                                  const std::vector<at::Tensor>& tensors,
                                                                  std::int64_t sample, std::size_t max_chars);

// Whether the root is a plain dict of tensors by string keys (the layout
// minrepro has always read and written).
bool isFlatDictOfTensors(const BatchNode& root);

}  // namespace minrepro
