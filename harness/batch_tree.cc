#include "harness/batch_tree.h"

#include "harness/batch_io.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>

namespace minrepro {

namespace {

bool identifier(const std::string& key) {
  if (key.empty() || std::isdigit(static_cast<unsigned char>(key[0]))) return false;
  for (char c : key)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

std::string quoted(const std::string& key) {
  std::string out = "[\"";
  for (char c : key) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"]";
}

// A top-level dict key is the name itself, as minrepro has always named
// the tensors of a dict batch; below it, ".key" (or ["key"] when the key
// is not an identifier) and "[i]" for an index or an integer key.
std::string childPath(const std::string& parent, const c10::IValue& key) {
  const bool root = parent == kRootPath;
  const std::string base = root ? "" : parent;
  if (key.isString()) {
    const std::string& k = key.toStringRef();
    if (root) return k;
    return base + (identifier(k) ? "." + k : quoted(k));
  }
  if (key.isInt()) return base + "[" + std::to_string(key.toInt()) + "]";
  return base + "[" + key.tagKind() + "]";
}

// What a batch's containers may hold: a pickle's shared references (a
// memo entry used twice) are walked once per use, so a 26 KB file of lists
// holding each other twice over expanded to gigabytes here (torch.load keeps
// them shared); and each level costs stack and a longer path.
struct FlattenBudget {
  static constexpr int kMaxDepth = 100;
  static constexpr std::size_t kMaxNodes = 1'000'000;
  std::size_t nodes = 0;
};

// "entry 'PATH'" (its first 80 characters), "entry of the batch" for the root.
std::string entryAt(const std::string& path) {
  return "entry " + (path == kRootPath ? std::string("of the batch") : "'" + path.substr(0, 80) + "'");
}

// A dict's key is a name: a string or an integer. Every report, rule and
// regular expression reads a name again (a key of 256 KB took init 20 s, a
// 50 MB one hours), and a control character in it (a newline) split
// REPORT.md's lines and the log's.
void checkKey(const c10::IValue& key, const std::string& path) {
  constexpr std::size_t kMaxKeyChars = 1024;
  if (!key.isString() && !key.isInt())
    throw std::invalid_argument(entryAt(path) + " has a key of type " + key.tagKind() +
                                "; minrepro reads dicts keyed by strings or integers");
  if (!key.isString()) return;
  const std::string& name = key.toStringRef();
  if (name.size() > kMaxKeyChars)
    throw std::invalid_argument(entryAt(path) + " has a key of " + std::to_string(name.size()) +
                                " characters (at most " + std::to_string(kMaxKeyChars) +
                                "); a batch's keys are names: keep long text in values");
  if (std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    throw std::invalid_argument(entryAt(path) +
                                " has a key holding a control character (a newline, a tab); a batch's keys are "
                                "names: rename it");
}

BatchNode flattenInto(const c10::IValue& value, const std::string& path, std::vector<std::string>& names,
                      std::vector<at::Tensor>& tensors, FlattenBudget& budget, int depth) {
  if (depth > FlattenBudget::kMaxDepth)
    throw std::invalid_argument("its containers are nested more than " + std::to_string(FlattenBudget::kMaxDepth) +
                                " levels deep (at " + path.substr(0, 80) +
                                "...); a training batch is a few levels of dicts, lists and tuples: save the batch "
                                "the step is given");
  if (++budget.nodes > FlattenBudget::kMaxNodes)
    throw std::invalid_argument("its dicts, lists and tuples hold more than " +
                                std::to_string(FlattenBudget::kMaxNodes) +
                                " entries in all (an entry held twice counts twice); a training batch holds far "
                                "fewer: save the batch the step is given, with its values in tensors");
  BatchNode node;
  node.path = path;
  if (value.isTensor()) {
    node.kind = BatchNode::Kind::Tensor;
    node.tensor = tensors.size();
    names.push_back(path);
    tensors.push_back(value.toTensor());
  } else if (value.isGenericDict()) {
    node.kind = BatchNode::Kind::Dict;
    for (const auto& entry : value.toGenericDict()) {
      checkKey(entry.key(), path);
      node.keys.push_back(entry.key());
      node.children.push_back(
          flattenInto(entry.value(), childPath(path, entry.key()), names, tensors, budget, depth + 1));
    }
  } else if (value.isList() || value.isTuple()) {
    node.kind = value.isList() ? BatchNode::Kind::List : BatchNode::Kind::Tuple;
    const auto elements = value.isList() ? value.toListRef().vec() : value.toTupleRef().elements().vec();
    for (std::size_t i = 0; i < elements.size(); ++i)
      node.children.push_back(flattenInto(elements[i], childPath(path, c10::IValue(static_cast<int64_t>(i))), names,
                                          tensors, budget, depth + 1));
  } else if (value.isNone() || value.isBool() || value.isInt() || value.isDouble() || value.isString() ||
             value.isComplexDouble()) {
    node.kind = BatchNode::Kind::Value;
    node.value = value;
  } else {
    throw std::invalid_argument("entry '" + path + "' is a " + value.tagKind() +
                                ", which minrepro cannot write back (it reads tensors, numbers, strings and None in "
                                "dicts, lists and tuples)");
  }
  return node;
}

bool keptChild(const BatchNode& node, std::size_t i, const std::optional<std::vector<std::int64_t>>& kept,
               std::size_t& next) {
  if (!node.per_sample || !kept) return true;
  while (next < kept->size() && (*kept)[next] < static_cast<std::int64_t>(i)) ++next;
  return next < kept->size() && (*kept)[next] == static_cast<std::int64_t>(i);
}

void ownersOf(const BatchNode& node, std::int64_t owner, std::vector<std::int64_t>& owners) {
  if (node.kind == BatchNode::Kind::Tensor) owners[node.tensor] = owner;
  for (std::size_t i = 0; i < node.children.size(); ++i)
    ownersOf(node.children[i], node.per_sample && owner < 0 ? static_cast<std::int64_t>(i) : owner, owners);
}

}  // namespace

std::string kindName(BatchNode::Kind kind) {
  switch (kind) {
    case BatchNode::Kind::Tensor:
      return "tensor";
    case BatchNode::Kind::Value:
      return "value";
    case BatchNode::Kind::Dict:
      return "dict";
    case BatchNode::Kind::List:
      return "list";
    case BatchNode::Kind::Tuple:
      return "tuple";
  }
  return "?";
}

BatchNode flattenBatch(const c10::IValue& value, std::vector<std::string>& names, std::vector<at::Tensor>& tensors) {
  FlattenBudget budget;
  return flattenInto(value, kRootPath, names, tensors, budget, 0);
}

c10::IValue rebuildBatch(const BatchNode& node, const std::vector<at::Tensor>& tensors,
                         const std::optional<std::vector<std::int64_t>>& kept) {
  switch (node.kind) {
    case BatchNode::Kind::Tensor:
      return tensors.at(node.tensor);
    case BatchNode::Kind::Value:
      return node.value;
    case BatchNode::Kind::Dict: {
      // Typed by its keys only: LibTorch's pickler then writes a plain dict
      // (a typed list of tensors would be written as a call that
      // torch.load(weights_only=True) refuses).
      const c10::TypePtr key_type = node.keys.empty() || node.keys[0].isString() ? c10::TypePtr(c10::StringType::get())
                                                                                 : c10::TypePtr(c10::IntType::get());
      c10::impl::GenericDict dict(key_type, c10::AnyType::get());
      for (std::size_t i = 0; i < node.children.size(); ++i)
        dict.insert(node.keys[i], rebuildBatch(node.children[i], tensors, kept));
      return dict;
    }
    case BatchNode::Kind::List:
    case BatchNode::Kind::Tuple: {
      std::vector<c10::IValue> elements;
      std::size_t next = 0;
      for (std::size_t i = 0; i < node.children.size(); ++i)
        if (keptChild(node, i, kept, next)) elements.push_back(rebuildBatch(node.children[i], tensors, kept));
      if (node.kind == BatchNode::Kind::Tuple) return c10::ivalue::Tuple::create(std::move(elements));
      c10::impl::GenericList list(c10::AnyType::get());
      for (auto& e : elements) list.push_back(std::move(e));
      return list;
    }
  }
  return {};
}

const BatchNode* findNode(const BatchNode& node, const std::string& path) {
  if (node.path == path) return &node;
  for (const BatchNode& child : node.children)
    if (const BatchNode* found = findNode(child, path)) return found;
  return nullptr;
}

BatchNode* findNode(BatchNode& node, const std::string& path) {
  return const_cast<BatchNode*>(findNode(static_cast<const BatchNode&>(node), path));
}

std::vector<std::int64_t> tensorOwners(const BatchNode& root, std::size_t tensor_count) {
  std::vector<std::int64_t> owners(tensor_count, -1);
  ownersOf(root, -1, owners);
  return owners;
}

bool isFlatDictOfTensors(const BatchNode& root) {
  if (root.kind != BatchNode::Kind::Dict) return false;
  for (std::size_t i = 0; i < root.children.size(); ++i)
    if (!root.keys[i].isString() || root.children[i].kind != BatchNode::Kind::Tensor) return false;
  return true;
}

namespace {

std::string pythonString(const std::string& text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' || c == '\\' ? std::string("\\") + c : c == '\n' ? std::string("\\n") : std::string(1, c);
  return out + "'";
}

std::string leafText(const c10::IValue& v) {
  if (v.isString()) return pythonString(v.toStringRef());
  if (v.isNone()) return "None";
  if (v.isBool()) return v.toBool() ? "True" : "False";
  if (v.isInt()) return std::to_string(v.toInt());
  std::ostringstream out;
  out << v;
  return out.str();
}

// The node as Python prints it, tensors by dtype and shape; `values`: set when a leaf is met.
std::string nodeText(const BatchNode& node, const std::vector<at::Tensor>& tensors, bool& values) {
  switch (node.kind) {
    case BatchNode::Kind::Tensor: {
      const at::Tensor& t = tensors[node.tensor];
      return "tensor(" + dtypeName(t.scalar_type()) + " " + c10::str(t.sizes()) + ")";
    }
    case BatchNode::Kind::Value:
      values = true;
      return leafText(node.value);
    case BatchNode::Kind::Dict: {
      std::string out = "{";
      for (std::size_t i = 0; i < node.children.size(); ++i)
        out += (i ? ", " : "") + leafText(node.keys[i]) + ": " + nodeText(node.children[i], tensors, values);
      return out + "}";
    }
    case BatchNode::Kind::List:
    case BatchNode::Kind::Tuple: {
      const bool list = node.kind == BatchNode::Kind::List;
      std::string out = list ? "[" : "(";
      for (std::size_t i = 0; i < node.children.size(); ++i)
        out += (i ? ", " : "") + nodeText(node.children[i], tensors, values);
      return out + (!list && node.children.size() == 1 ? ",)" : list ? "]" : ")");
    }
  }
  return "";
}

void collectEntryTexts(const BatchNode& node, const std::vector<at::Tensor>& tensors, std::int64_t sample,
                       std::size_t max_chars, std::vector<std::pair<std::string, std::string>>& out) {
  if (node.per_sample) {
    if (sample < 0 || static_cast<std::size_t>(sample) >= node.children.size()) return;
    bool values = false;
    std::string text = nodeText(node.children[static_cast<std::size_t>(sample)], tensors, values);
    if (!values) return;
    if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
    out.emplace_back(node.path == kRootPath ? std::string("the batch") : node.path, text);
    return;
  }
  for (const BatchNode& child : node.children) collectEntryTexts(child, tensors, sample, max_chars, out);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> sampleEntryTexts(const BatchNode& root,
                                                                  const std::vector<at::Tensor>& tensors,
                                                                  std::int64_t sample, std::size_t max_chars) {
  std::vector<std::pair<std::string, std::string>> out;
  collectEntryTexts(root, tensors, sample, max_chars, out);
  return out;
}

}  // namespace minrepro
