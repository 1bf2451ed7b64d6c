// Batch files: reading torch.save dicts, laying out candidate tensors as the
// original is laid out, and writing them as a stream (harness/batch_io.h).
#include "harness/batch_io.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/storage_context.h>

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/errors.h"
#include "core/text_lines.h"
#include "harness/deep_stack.h"
#include "harness/pickle_budget.h"
#include "harness/stored_zip.h"
#include "harness/zip_directory.h"

namespace fs = std::filesystem;

namespace minrepro {

const at::Tensor* NamedTensors::find(const std::string& name) const {
  if (index)
    if (const auto at = index->find(name); at != index->end() && at->second < names.size() && names[at->second] == name)
      return &tensors[at->second];
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return &tensors[i];
  return nullptr;
}

std::string dtypeName(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat:
      return "float32";
    case c10::kDouble:
      return "float64";
    case c10::kHalf:
      return "float16";
    case c10::kBFloat16:
      return "bfloat16";
    case c10::kLong:
      return "int64";
    case c10::kInt:
      return "int32";
    case c10::kShort:
      return "int16";
    case c10::kChar:
      return "int8";
    case c10::kByte:
      return "uint8";
    case c10::kBool:
      return "bool";
    case c10::kComplexFloat:
      return "complex64";
    case c10::kComplexDouble:
      return "complex128";
    default:
      return c10::toString(type);
  }
}

std::string layoutName(const at::Tensor& t) {
  if (t.is_contiguous()) return "contiguous";
  if (t.dim() <= 1) return "strided";  // a 1-D view with a step (x[::3])
  if (t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast)) return "channels_last";
  std::vector<int64_t> reversed(static_cast<std::size_t>(t.dim()));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  if (t.permute(reversed).is_contiguous()) return "transposed";
  return "strided";
}

namespace {

// The word right after `marker` in an unpickler's message, up to a space
// or the line's end; "" without the marker.
std::string wordAfter(const std::string& what, const std::string& marker) {
  const auto at = what.find(marker);
  if (at == std::string::npos) return "";
  const std::size_t from = at + marker.size();
  return what.substr(from, what.find_first_of(" \n", from) - from);
}

// " (Batch)" from LibTorch's "Unknown pickler class idBatch".
std::string classNamed(const std::string& what) {
  const std::string name = wordAfter(what, "class id");
  return name.empty() ? "" : " (" + name + ")";
}

// The callable a pickle names from a module that runs commands or code
// (posix.system, builtins.eval, subprocess.Popen), or that loads a pickle
// of its own (torch.storage._load_from_bytes, _pickle.loads: their inner
// pickle runs wherever torch.load is not weights_only), from the
// unpickler's "unknown type MODULE.NAME"; "" for anything else. Such a
// pickle is an attack or a mistake, not a class of the user's (probes 32,
// 33).
std::string codeRunningCallable(const std::string& what) {
  const std::string name = wordAfter(what, "unknown type ");
  if (name.empty()) return "";
  static const std::set<std::string> kModules = {
      "os",         "posix",     "nt",      "subprocess", "builtins",    "__builtin__", "sys",       "shutil",
      "socket",     "pty",       "runpy",   "code",       "commands",    "ctypes",      "importlib", "operator",
      "pickle",     "_pickle",   "cPickle", "dill",       "cloudpickle", "joblib",      "marshal",   "timeit",
      "webbrowser", "functools", "types",   "codecs",     "platform"};
  static const std::set<std::string> kLoaders = {"torch.storage._load_from_bytes", "torch.load",
                                                 "torch.serialization.load"};
  return kModules.count(name.substr(0, name.find('.'))) || kLoaders.count(name) ? name : "";
}

// A tensor LibTorch's reader does not rebuild, by the function torch.save
// names for it: what it is and how to save it instead ("" for none of them).
std::string tensorKindNamed(const std::string& what) {
  const auto names = [&](const char* function) { return what.find(function) != std::string::npos; };
  if (names("_rebuild_tensor_v3"))
    return "the batch holds a tensor of a dtype that torch.save writes in its newer form (uint16, uint32, uint64 or "
           "a float8 type), which minrepro's reader cannot load: save it converted (t.to(torch.int32), "
           "t.to(torch.float16)) and convert it back in the step";
  if (names("_get_layout") || names("_rebuild_sparse"))
    return "the batch holds a sparse tensor, which minrepro cannot cut into samples: save it dense (t.to_dense()) "
           "and make it sparse again in the step (t.to_sparse())";
  if (names("_rebuild_meta_tensor"))
    return "the batch holds a tensor on the meta device, which has shapes but no values: save the tensors the "
           "step is given, with their values";
  if (names("_rebuild_nested_tensor"))
    return "the batch holds a nested tensor: save the list of its tensors (list(t.unbind())) and nest them again "
           "in the step (torch.nested.nested_tensor(...))";
  if (names("_rebuild_wrapper_subclass") || names("_rebuild_from_type"))
    return "the batch holds a tensor subclass (a DTensor, a Parameter or a class of your own): save the plain "
           "tensor (t.detach().clone() as a torch.Tensor, or t.full_tensor() for a DTensor)";
  return "";
}

// LibTorch 1.13's unpickler cannot read a dict with exactly one entry, which
// Python writes with a different opcode; say so instead of "Unknown opcode".
std::string explainUnpickleError(const std::string& what) {
  if (what.find("Unknown opcode") != std::string::npos) {
    // STACK_GLOBAL (147): pickle protocol 4 or later names a function or
    // class so; torch.save's default protocol names them otherwise (probe
    // 33: it was blamed on LibTorch 1.13 under 2.13).
    if (what.size() >= 5 && what.compare(what.size() - 5, 5, ": 147") == 0)
      return " (the pickle names a function or class as pickle protocol 4 and later do, which LibTorch's reader "
             "does not read, and nothing of it ran: save the batch with torch.save(batch, path) and its default "
             "protocol)";
#if TORCH_VERSION_MAJOR < 2
    return " (LibTorch 1.13 cannot read a dict with exactly one entry, nor numpy arrays, "
           "torch.Size or nn.Parameter values: save a dict of two or more plain tensors)";
#else
    return " (an opcode LibTorch's reader does not know: save the batch with torch.save(batch, path) and its "
           "default protocol, as dicts, lists and tuples of tensors)";
#endif
  }
  if (const std::string kind = tensorKindNamed(what); !kind.empty()) return " (" + kind + ")";
  if (const std::string callable = codeRunningCallable(what); !callable.empty())
    return " (the pickle calls " + callable +
           ", a function that runs commands or code, not a class of a batch: minrepro never runs a pickle's code "
           "and refused it; do not load this file with torch.load(..., weights_only=False) either)";
  if (what.find("Unknown pickler class") != std::string::npos || what.find("unknown type") != std::string::npos)
    return " (the batch holds an object of a class of your own" + classNamed(what) +
           ", such as a named tuple, which minrepro cannot "
           "write back: save it as a plain tuple or dict wherever it sits in the batch (tuple(batch) or "
           "batch._asdict() for the batch itself; batch[\"inputs\"] = tuple(batch[\"inputs\"]) for one inside "
           "a dict) and rebuild it in the step, e.g. Batch(*torch.load(path)); minrepro_capture does this by "
           "itself)";
  return " (save it with torch.save(batch, path): dicts, lists and tuples of tensors)";
}

std::string firstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

// LibTorch's reader's words for a crafted pickle, said as what is in the
// file (probe 36): an internal assert's "please report a bug to PyTorch"
// for a persistent id that is not a tuple, an opcode byte printed
// sign-extended ("at 0xffffffffffffff82: 130"), an integer too long for it.
std::string plainReaderMessage(std::string what) {
  if (const auto assert_at = what.find(" INTERNAL ASSERT FAILED at "); assert_at != std::string::npos) {
    const auto report = what.find("please report a bug to PyTorch.", assert_at);
    const std::string detail = report == std::string::npos ? "" : what.substr(report + 31);
    return "its pickle does not hold what LibTorch's reader expects there (" +
           std::string(text::trim(detail).empty() ? what.substr(0, assert_at) : text::trim(detail)) + ")";
  }
  if (what.rfind("Unknown opcode for unpickling at ", 0) == 0)
    if (const auto colon = what.rfind(": "); colon != std::string::npos) {
      const int code = std::atoi(what.c_str() + colon + 2);
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", code & 0xff);
      return "unknown pickle opcode " + std::to_string(code) + " (" + hex + ")";
    }
  if (what.rfind("Expected length to be 8, got ", 0) == 0)
    return "a pickled integer of " + what.substr(29) + " bytes, where LibTorch reads at most 8";
  return what;
}

// Read record by record from the file (no copy of the whole file), with a
// storage context so that tensors saved as views of one storage come back
// as views of one storage, as torch.load gives them: pickle_load would give
// each its own copy, and a kernel that reads past a view would see other
// memory than in the user's process.
c10::IValue unpickleBatch(const fs::path& file,
                          const std::shared_ptr<torch::jit::DeserializationStorageContext>& storages) {
  caffe2::serialize::PyTorchStreamReader reader(file.string());
  return torch::jit::readArchiveAndTensors("data", "", "", c10::nullopt, c10::nullopt, c10::nullopt, reader,
                                           torch::jit::Unpickler::defaultTypeParser, storages);
}

// Calls visit(reader, name, size or 0) for each record of the zip, in
// order, until it returns false; what a visit does not read is skipped.
void forEachZipRecord(const fs::path& file,
                      const std::function<bool(struct archive*, const std::string&, std::uint64_t)>& visit) {
  struct archive* a = archive_read_new();
  archive_read_support_format_zip_seekable(a);
  if (archive_read_open_filename(a, file.c_str(), 1 << 16) == ARCHIVE_OK) {
    struct archive_entry* entry = nullptr;
    while (archive_read_next_header(a, &entry) == ARCHIVE_OK) {
      const std::string name = archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "";
      const auto size = archive_entry_size_is_set(entry) ? static_cast<std::uint64_t>(archive_entry_size(entry)) : 0;
      if (!visit(a, name, size)) break;
      archive_read_data_skip(a);
    }
  }
  archive_read_free(a);
}

// Each storage record's size as the zip's central directory gives it
// ("0" for ".../data/0"): LibTorch makes a storage of the size the pickle
// declares over the record's bytes, however few there are.
std::map<std::string, std::uint64_t> storageRecordSizes(const fs::path& file) {
  std::map<std::string, std::uint64_t> sizes;
  for (const ZipEntry& e : readZipDirectory(file).entries)
    if (const auto data = e.name.rfind("/data/"); data != std::string::npos) sizes[e.name.substr(data + 6)] = e.size;
  return sizes;
}

// What torch.save never writes and a crafted zip may: two records of one
// name (which one would be read?), a compressed record that expands far
// past the file, records that together hold far more than it, and
// directory entries whose records share bytes (torch.save stores each
// record once, as it is, one after another). LibTorch reads every record
// whole, so a 3 MB file of fifty records inflating to 60 MiB each, or a
// directory of 400 entries that all point at one 25 MiB record (probe 36:
// 3.1 and 4.3 GB), would fill memory before anything else is checked.
// Returns what is wrong, "" when none.
std::string craftedZip(const fs::path& file) {
  constexpr std::uint64_t kMaxRecordsPastFile = std::uint64_t{256} << 20;
  constexpr std::uint64_t kLocalHeader = 30;  // a local header's fixed part: a record starts past it
  std::error_code ec;
  const std::uint64_t file_size = fs::file_size(file, ec);
  ZipDirectory zip = readZipDirectory(file);
  std::stable_sort(zip.entries.begin(), zip.entries.end(),
                   [](const ZipEntry& a, const ZipEntry& b) { return a.header_offset < b.header_offset; });
  for (std::size_t i = 1; i < zip.entries.size(); ++i) {
    const ZipEntry &before = zip.entries[i - 1], &after = zip.entries[i];
    const std::uint64_t gap = after.header_offset - before.header_offset;
    if (gap < kLocalHeader || gap - kLocalHeader < before.compressed)
      return "its directory entries " + before.name + " and " + after.name +
             " point into the same bytes (torch.save writes each record once, one after another)";
  }
  if (const ZipEntry* e = firstMismatchedLocalHeader(file, zip))
    return "its directory entry " + e->name + " points at no record of that name (torch.load refuses it)";
  std::set<std::string> names;
  std::uint64_t total = 0;
  for (const ZipEntry& e : zip.entries) {
    total += std::min<std::uint64_t>(e.size, std::uint64_t{1} << 50);  // no wrap-around from a declared 2^64
    if (!names.insert(e.name).second) return "it holds two records named " + e.name;
    if (e.size > (std::uint64_t{64} << 20) && e.size > 16 * file_size)
      return "its record " + e.name + " expands to " + std::to_string(e.size >> 20) + " MiB from a file of " +
             std::to_string(file_size >> 10) + " KiB (a compressed record; torch.save stores them as they are)";
    if (total > file_size + kMaxRecordsPastFile)
      return "its records add up to more than " + std::to_string(total >> 20) + " MiB from a file of " +
             std::to_string(file_size >> 20) + " MiB (compressed records; torch.save stores them as they are)";
  }
  return "";
}

// The pickle's record (NAME/data.pkl), read whole when it is of a batch's
// size; what is over the pickle budget in it (harness/pickle_budget.h), or
// "". The record holds no tensor's bytes (those are records of their own):
// past 256 MiB it is no batch's.
std::string pickleOverBudget(const fs::path& file) {
  constexpr std::uint64_t kMaxPickle = std::uint64_t{256} << 20;
  std::string what;
  forEachZipRecord(file, [&](struct archive* a, const std::string& name, std::uint64_t size) {
    if (!name.ends_with("/data.pkl") || name.find('/') != name.rfind('/')) return true;
    if (size > kMaxPickle) {
      what = "its pickle (" + name + ") is " + std::to_string(size >> 20) +
             " MiB without the tensors' bytes, where a batch's is a few KB";
      return false;
    }
    std::string pickle(static_cast<std::size_t>(size), '\0');
    if (archive_read_data(a, pickle.data(), pickle.size()) == static_cast<la_ssize_t>(pickle.size()))
      what = overPickleBudget(pickle);
    return false;
  });
  return what;
}

// A storage the pickle declares larger than its record (a damaged or
// crafted file: torch.load refuses it, "record size does not match"):
// every read of its tensors would go past the record's buffer.
std::string shortRecord(const fs::path& file, torch::jit::DeserializationStorageContext& storages) {
  for (const auto& [key, size] : storageRecordSizes(file)) {
    if (!storages.hasStorage(key)) continue;
    const auto declared = static_cast<std::uint64_t>(storages.getStorage(key).nbytes());
    if (declared > size)
      return "its storage record data/" + key + " holds " + std::to_string(size) + " bytes where " +
             std::to_string(declared) + " are declared";
  }
  return "";
}

// A zip whose end lacks its central directory, which torch.save writes
// last: a save that did not finish or a copy that was cut ("" when whole).
std::string cutShort(const fs::path& file) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  const std::uint64_t tail = std::min<std::uint64_t>(size, 65536 + 22);  // the directory's end record and a comment
  std::string end(tail, '\0');
  in.seekg(static_cast<std::streamoff>(size - tail));
  in.read(end.data(), static_cast<std::streamsize>(tail));
  if (end.find("PK\x05\x06") != std::string::npos) return "";
  return "is cut short (" + std::to_string(size) +
         " bytes, without the zip directory torch.save writes at the end): the save did not finish or the copy "
         "was cut; save the batch again with torch.save(batch, path)";
}

// A file that is not the zip torch.save writes since PyTorch 1.6, said for
// what it is (the stream reader's "miniz" error names none of these), with
// how to re-save it; "" for a zip or anything else.
std::string notAZipBatch(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  char head[14] = {};
  in.read(head, sizeof head);
  const auto got = in.gcount();
  if (got == 0)
    return "is empty (0 bytes): the save did not finish or the file was truncated; save the batch again with "
           "torch.save(batch, path)";
  if (got >= 4 && std::string(head, 4) == "PK\x03\x04") return cutShort(file);
  // The line is pasted into a shell: the name is one word there, and Python
  // reads it from sys.argv, never from its own source (probe 32).
  const auto resave = [&](const std::string& load) {
    return "re-save it with a current torch, if you trust the file (loading runs its pickled code): "
           "python -c 'import pickle, sys, torch; torch.save(" +
           load + ", \"resaved.pt\")' " + text::shellWord(file.filename().string()) + "; then give resaved.pt";
  };
  // torch.save's legacy format: a pickle whose first object is its magic number.
  static const std::string kLegacyMagic("\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 12);
  if (got == 14 && static_cast<unsigned char>(head[0]) == 0x80 && std::string(head + 2, 12) == kLegacyMagic)
    return "saved in torch.save's legacy format (_use_new_zipfile_serialization=False, or PyTorch before 1.6), "
           "which minrepro does not read; " +
           resave("torch.load(sys.argv[1], weights_only=False)");
  if (got >= 2 && static_cast<unsigned char>(head[0]) == 0x80 && head[1] >= 2 && head[1] <= 5)
    return "a plain pickle (pickle.dump), not a torch.save file; " + resave("pickle.load(open(sys.argv[1], \"rb\"))");
  return "";
}

// A tensor whose sizes, strides and offset reach past the bytes its
// storage record holds (a damaged or crafted file: torch.load refuses it
// with "record size does not match"): every later read of it would read
// past a buffer. Returns what is wrong, "" when every tensor fits.
std::string storageOverrun(const NamedTensors& batch) {
  for (std::size_t i = 0; i < batch.tensors.size(); ++i) {
    const at::Tensor& t = batch.tensors[i];
    if (t.numel() == 0 || !t.has_storage()) continue;
    std::int64_t last = t.storage_offset();
    for (std::int64_t d = 0; d < t.dim(); ++d) {
      if (t.stride(d) < 0) return "'" + batch.names[i] + "' has a negative stride";
      last += (t.size(d) - 1) * t.stride(d);
    }
    const auto needed = static_cast<std::uint64_t>(last + 1) * t.element_size();
    const auto held = static_cast<std::uint64_t>(t.storage().nbytes());
    if (needed > held)
      return "'" + batch.names[i] + "' needs " + std::to_string(needed) + " bytes of its storage and the file holds " +
             std::to_string(held);
  }
  return "";
}

// Two tensors over one storage record with different dtypes: torch.save
// refuses to write them ("view the same data as different types"), and
// torch.load reads both with the first one's dtype where LibTorch gives
// each its own (probe 36: a target of class ids for minrepro, float zeros
// for the step). Returns what is wrong, "" when each storage has one dtype.
std::string storageOfTwoDtypes(const NamedTensors& batch) {
  std::unordered_map<const c10::StorageImpl*, std::size_t> first;
  for (std::size_t i = 0; i < batch.tensors.size(); ++i) {
    const at::Tensor& t = batch.tensors[i];
    if (!t.defined() || !t.has_storage()) continue;
    const auto [at, inserted] = first.emplace(t.storage().unsafeGetStorageImpl(), i);
    const at::Tensor& other = batch.tensors[at->second];
    if (!inserted && other.scalar_type() != t.scalar_type())
      return "'" + batch.names[at->second] + "' (" + c10::toString(other.scalar_type()) + ") and '" + batch.names[i] +
             "' (" + c10::toString(t.scalar_type()) +
             ") read one storage record as two dtypes, which torch.save refuses to write and torch.load reads "
             "otherwise";
  }
  return "";
}

// Views that repeat their storage past what minrepro writes dense: it
// writes a candidate's tensors dense, so its candidates would be that large.
// A stride of 0 (expand(), a broadcast mask; probe 31: [8, 2e9] over 32
// bytes took shrink to 8 GB and an allocation failure) or strides that make
// elements overlap (as_strided with stride 1 along two axes; probe 41: a
// 400 KB file read as 4 GiB by check, and compare's float32 copy of it
// written to disk): whatever the strides, a view holds more elements than
// the storage span it covers. At most 1 GiB for all of them together (probe
// 34: views of 3 GiB, each under the 8 GiB a view then had, took check to
// 4.3 GB from a 2 KB file). Returns what is wrong, "" when the views are
// within it.
std::string expandedPastMemory(const NamedTensors& batch) {
  constexpr std::uint64_t kMaxDense = std::uint64_t{1} << 30;
  const auto sizeText = [](std::uint64_t bytes) {
    return bytes >= (std::uint64_t{10} << 30) ? std::to_string(bytes >> 30) + " GiB"
                                              : std::to_string(bytes >> 20) + " MiB";
  };
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < batch.tensors.size(); ++i) {
    const at::Tensor& t = batch.tensors[i];
    if (!t.defined() || !t.has_storage() || t.numel() == 0) continue;
    bool expanded = false;
    std::uint64_t span = 1;  // elements from the first to the last the view reads, both included
    for (std::int64_t d = 0; d < t.dim(); ++d) {
      expanded = expanded || (t.stride(d) == 0 && t.size(d) > 1);
      span += static_cast<std::uint64_t>(t.size(d) - 1) * static_cast<std::uint64_t>(std::llabs(t.stride(d)));
    }
    if (static_cast<std::uint64_t>(t.numel()) <= span) continue;  // no element read twice
    const auto dense = static_cast<std::uint64_t>(t.numel()) * t.element_size();
    total += dense;
    if (total <= kMaxDense) continue;
    std::ostringstream sizes, strides;
    sizes << t.sizes();
    strides << t.strides();
    return "'" + batch.names[i] + "' is " +
           (expanded ? std::string("an expand()ed view")
                     : "a view whose strides " + strides.str() + " read its elements more than once (as_strided)") +
           ", " + sizes.str() + " " + std::string(c10::toString(t.scalar_type())) + ": " + sizeText(dense) +
           " dense over " + std::to_string(t.storage().nbytes()) + " bytes of storage" +
           (total > dense ? " (" + sizeText(total) + " with the batch's other expanded views)" : std::string()) +
           ", past the 1 GiB minrepro writes dense for a candidate; save " +
           (expanded ? "its un-expanded base (x[:, :1]) and expand it" : "the storage and make the view") +
           " in the step";
  }
  return "";
}

// readBatchFile on the caller's stack: the IValue it unpickles is built and
// freed here, as deep as the file nests it.
NamedTensors readBatchFileHere(const fs::path& file) {
  if (!fs::is_regular_file(file))
    throw BadInputError(file.string() + ": cannot read the batch file (does it exist, is it readable?)");
  if (const std::string what = notAZipBatch(file); !what.empty()) throw BadInputError(file.string() + ": " + what);
  if (const std::string what = craftedZip(file); !what.empty())
    throw BadInputError(file.string() + ": not as torch.save writes it: " + what +
                        "; refused before reading it (save the batch again with torch.save)");
  if (const std::string what = pickleOverBudget(file); !what.empty())
    throw BadInputError(file.string() + ": " + what +
                        "; refused before reading it: save the batch the step is given, with its values in tensors");
  c10::IValue value;
  const auto storages = std::make_shared<torch::jit::DeserializationStorageContext>();
  try {
    value = unpickleBatch(file, storages);
  } catch (const std::exception& e) {
    std::string what = firstLine(e.what());
    // The stream reader's advice on its own internals says nothing the user can act on.
    what = what.substr(0, what.find(". This is an internal miniz error"));
    const bool object = what.find("Unknown pickler class") != std::string::npos;
    throw BadInputError(file.string() + ": " +
                        (object ? "cannot be read" : "not a readable torch.save file: " + plainReaderMessage(what)) +
                        explainUnpickleError(what));
  }
  if (const std::string short_record = shortRecord(file, *storages); !short_record.empty())
    throw BadInputError(file.string() + ": damaged: " + short_record +
                        " (torch.load refuses it too); save the batch again with torch.save");
  NamedTensors batch;
  try {
    batch.tree = std::make_shared<const BatchNode>(flattenBatch(value, batch.names, batch.tensors));
  } catch (const std::invalid_argument& e) {
    throw BadInputError(file.string() + ": " + e.what());
  }
  if (const std::string overrun = storageOverrun(batch); !overrun.empty())
    throw BadInputError(file.string() + ": damaged: " + overrun +
                        " (torch.load refuses it too); save the batch again with torch.save");
  if (const std::string mixed = storageOfTwoDtypes(batch); !mixed.empty())
    throw BadInputError(file.string() + ": not as torch.save writes it: " + mixed +
                        "; save the batch again with torch.save");
  // Each tensor is a name every report, rule and inference step goes
  // through: 524 288 references to one 4x3 tensor (a 2 KB file) held init
  // for hours (probe 35).
  constexpr std::size_t kMaxTensors = 100'000;
  if (batch.tensors.size() > kMaxTensors)
    throw BadInputError(file.string() + ": it holds " + std::to_string(batch.tensors.size()) +
                        " tensors (a tensor held twice counts twice; at most " + std::to_string(kMaxTensors) +
                        "), where a batch holds a few thousand: save the batch the step is given, with per-sample "
                        "tensors stacked");
  if (const std::string expanded = expandedPastMemory(batch); !expanded.empty())
    throw BadInputError(file.string() + ": " + expanded);
  // A quantized tensor's values are integers under a scale: cutting, trivial
  // values and the reports' summaries would each need their own path.
  for (std::size_t i = 0; i < batch.tensors.size(); ++i)
    if (batch.tensors[i].defined() && batch.tensors[i].is_quantized())
      throw BadInputError(file.string() + ": '" + batch.names[i] + "' is a quantized tensor (" +
                          std::string(c10::toString(batch.tensors[i].scalar_type())) +
                          "), which minrepro does not reduce: save it dequantized (t.dequantize(), with its scale "
                          "and zero point beside it) and quantize it again in the step");
  return batch;
}

}  // namespace

std::string samplesPastTheirData(std::int64_t samples, const NamedTensors& batch) {
  constexpr std::int64_t kFreeSamples = 1'000'000, kBytesPerSample = 8;
  if (samples <= kFreeSamples) return "";
  std::set<const c10::StorageImpl*> seen;
  std::uint64_t bytes = 0;
  for (const at::Tensor& t : batch.tensors)
    if (t.defined() && t.has_storage() && seen.insert(t.storage().unsafeGetStorageImpl()).second)
      bytes += t.storage().nbytes();
  if (bytes >= static_cast<std::uint64_t>(samples) * kBytesPerSample) return "";
  return "the batch declares " + std::to_string(samples) + " samples (a dimension that long) but holds " +
         std::to_string(bytes) + " bytes of tensor data, fewer than " + std::to_string(kBytesPerSample) +
         " per sample: tensors with an empty dimension beside it hold nothing for those samples; save the batch the "
         "step is given";
}

NamedTensors readBatchFile(const fs::path& file) {
  // LibTorch frees a nested IValue recursively (harness/deep_stack.h).
  NamedTensors batch;
  runOnDeepStack([&] { batch = readBatchFileHere(file); });
  auto index = std::make_shared<std::unordered_map<std::string, std::size_t>>();
  for (std::size_t i = 0; i < batch.names.size(); ++i) index->emplace(batch.names[i], i);
  batch.index = std::move(index);
  return batch;
}

at::Tensor copyWithStrideOrder(const at::Tensor& values, const at::Tensor& layout_of) {
  if (values.dim() == 0) return values.clone();
  // Order dimensions from the largest stride to the smallest (ties keep
  // their order), allocate contiguously in that order and permute back.
  std::vector<int64_t> order(static_cast<std::size_t>(layout_of.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return layout_of.stride(a) > layout_of.stride(b); });
  std::vector<int64_t> sizes, inverse(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    sizes.push_back(values.size(order[i]));
    inverse[static_cast<std::size_t>(order[i])] = static_cast<int64_t>(i);
  }
  at::Tensor out = at::empty(sizes, values.options()).permute(inverse);
  out.copy_(values);
  return out;
}

at::Tensor cloneKeepingLayout(const at::Tensor& t) { return copyWithStrideOrder(t, t); }

namespace {

// Whether `values` is the same along dimension `d`, so that a broadcast
// (stride 0) dimension of the original can stay one.
bool constantAlong(const at::Tensor& values, int64_t d) {
  if (values.size(d) <= 1) return true;
  const at::Tensor first = values.narrow(d, 0, 1).expand_as(values);
  at::Tensor same = values.eq(first);
  if (at::isFloatingType(values.scalar_type()) || at::isComplexType(values.scalar_type()))
    same.logical_or_(values.isnan().logical_and(first.isnan()));  // NaN is NaN's own value here
  return same.all().item<bool>();
}

}  // namespace

StridePattern stridePatternFor(at::IntArrayRef sizes, const at::Tensor& layout_of,
                               const std::function<bool(int64_t)>& stays_broadcast) {
  const int64_t dims = layout_of.dim();
  // Innermost first: dimensions by stride, smallest first (ties: later
  // dimension inner); a broadcast one outermost, should it need memory.
  std::vector<int64_t> order(static_cast<std::size_t>(dims));
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int64_t d) {
    return layout_of.stride(d) == 0 ? std::numeric_limits<int64_t>::max() : layout_of.stride(d);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return key(a) < key(b) || (key(a) == key(b) && a > b); });
  StridePattern p;
  p.strides.assign(static_cast<std::size_t>(dims), 0);
  int64_t dense_original = 1, dense_new = 1;  // extent of the dimensions inside the current one
  // A non-contiguous tensor stays non-contiguous: a dimension cut to one
  // element keeps the room of two, so that the dimensions outside it keep a
  // stride past theirs (a transposed [16, 3] cut to one sample is [1, 3]
  // with strides (1, 2), not a contiguous row, which takes other kernels and
  // which the layout invariant rejects, keeping two samples).
  const bool keep_apart =
      !layout_of.is_contiguous() && !(dims == 4 && layout_of.is_contiguous(at::MemoryFormat::ChannelsLast));
  for (int64_t d : order) {
    const int64_t stride = layout_of.stride(d);
    if (stride == 0 && layout_of.size(d) > 1 && stays_broadcast(d)) continue;
    // Size-1 dimensions have no gap of their own (their stride is arbitrary).
    const int64_t gap = layout_of.size(d) > 1 ? std::max<int64_t>(stride - dense_original, 0) : 0;
    p.strides[static_cast<std::size_t>(d)] = dense_new + gap;
    if (layout_of.size(d) > 1 && stride > 0) dense_original = stride * layout_of.size(d);
    const int64_t room = keep_apart && sizes[d] == 1 && layout_of.size(d) > 1 ? 2 : 1;
    dense_new = p.strides[static_cast<std::size_t>(d)] * std::max<int64_t>(sizes[d], room);
    // Every dimension's stride covers all those inside it: the last one
    // with more than one element holds each of its slices in a block.
    if (sizes[d] > 1) p.outer = static_cast<int>(d);
  }
  p.offset = layout_of.storage_offset();
  int64_t numel = 1;
  for (int64_t d = 0; d < dims; ++d) numel *= sizes[d];
  int64_t span = numel > 0 ? 1 : 0;
  for (int64_t d = 0; d < dims && numel > 0; ++d) span += (sizes[d] - 1) * p.strides[static_cast<std::size_t>(d)];
  p.storage_numel = p.offset + span;
  return p;
}

namespace {

// `values` written into `out` (laid out by a pattern): a kept broadcast
// dimension is written once, its elements being one location.
void copyIntoPattern(at::Tensor out, at::Tensor values) {
  for (int64_t d = 0; d < values.dim(); ++d)
    if (out.stride(d) == 0 && values.size(d) > 1) {
      out = out.narrow(d, 0, 1);
      values = values.narrow(d, 0, 1);
    }
  out.copy_(values);
}

}  // namespace

at::Tensor copyWithStridePattern(const at::Tensor& values, const at::Tensor& layout_of) {
  const StridePattern p =
      stridePatternFor(values.sizes(), layout_of, [&](int64_t d) { return constantAlong(values, d); });
  // Zeros before the offset and in the gaps: what the original's storage
  // held there belonged to other tensors or samples, which the reduction
  // removed (and which may be data nobody should receive).
  at::Tensor out = at::zeros({p.storage_numel}, values.options()).as_strided(values.sizes(), p.strides, p.offset);
  copyIntoPattern(out, values);
  return out;
}

at::Tensor tensorWithoutData(c10::ScalarType dtype, at::IntArrayRef sizes, const StridePattern& pattern) {
  const auto item = static_cast<std::size_t>(c10::elementSize(dtype));
  c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<std::size_t>(pattern.storage_numel) * item,
                       at::DataPtr(nullptr, at::Device(at::kCPU)), /*allocator=*/nullptr, /*resizable=*/false);
  return at::empty({0}, at::TensorOptions().dtype(dtype)).set_(storage, pattern.offset, sizes, pattern.strides);
}

namespace {
std::atomic<int64_t> g_slab_bytes{32 << 20};
}  // namespace

int64_t slabBytes() { return g_slab_bytes.load(); }
void setSlabBytes(int64_t bytes) { g_slab_bytes.store(std::max<int64_t>(bytes, 1)); }

void produceInSlabs(const StridePattern& pattern, at::IntArrayRef sizes, c10::ScalarType dtype,
                    const std::function<at::Tensor(int64_t begin, int64_t end)>& slab, const ByteSink& sink) {
  const auto item = c10::elementSize(dtype);
  const bool empty = pattern.storage_numel == pattern.offset;
  if (pattern.outer < 0 || empty) {  // at most one element (or one broadcast), or none: one piece
    at::Tensor out = at::zeros({pattern.storage_numel}, at::TensorOptions().dtype(dtype));
    if (!empty) copyIntoPattern(out.as_strided(sizes, pattern.strides, pattern.offset), slab(0, 1));
    sink(out.data_ptr(), static_cast<std::size_t>(out.numel()) * item);
    return;
  }
  const int64_t outer = pattern.outer, block = pattern.strides[static_cast<std::size_t>(outer)];
  const int64_t count = sizes[outer];
  const int64_t per_slab = std::max<int64_t>(1, slabBytes() / std::max<int64_t>(block * item, 1));
  for (int64_t begin = 0; begin < count; begin += per_slab) {
    const int64_t end = std::min(count, begin + per_slab);
    const int64_t first = begin == 0 ? 0 : pattern.offset + begin * block;
    const int64_t last = end == count ? pattern.storage_numel : pattern.offset + end * block;
    at::Tensor piece = at::zeros({last - first}, at::TensorOptions().dtype(dtype));
    std::vector<int64_t> slab_sizes = sizes.vec();
    slab_sizes[static_cast<std::size_t>(outer)] = end - begin;
    copyIntoPattern(piece.as_strided(slab_sizes, pattern.strides, pattern.offset + begin * block - first),
                    slab(begin, end));
    sink(piece.data_ptr(), static_cast<std::size_t>(piece.numel()) * item);
  }
}

at::Tensor materializeInSlabs(const StridePattern& pattern, at::IntArrayRef sizes, c10::ScalarType dtype,
                              const std::function<at::Tensor(int64_t begin, int64_t end)>& slab) {
  int64_t distinct = 1;  // elements with a location of their own
  for (std::size_t d = 0; d < sizes.size(); ++d) distinct *= pattern.strides[d] != 0 ? sizes[d] : 1;
  const bool empty = pattern.storage_numel == pattern.offset;
  const bool dense = pattern.offset == 0 && pattern.storage_numel == distinct;
  const auto options = at::TensorOptions().dtype(dtype);
  // Zeros where no element goes (before the offset, in the gaps), as in a file.
  at::Tensor storage =
      dense ? at::empty({pattern.storage_numel}, options) : at::zeros({pattern.storage_numel}, options);
  at::Tensor out = storage.as_strided(sizes, pattern.strides, pattern.offset);
  if (empty) return out;
  if (pattern.outer < 0) {
    copyIntoPattern(out, slab(0, 1));
    return out;
  }
  const int64_t outer = pattern.outer, count = sizes[outer];
  const int64_t block =
      pattern.strides[static_cast<std::size_t>(outer)] * static_cast<int64_t>(c10::elementSize(dtype));
  const int64_t per_slab = std::max<int64_t>(1, slabBytes() / std::max<int64_t>(block, 1));
  for (int64_t begin = 0; begin < count; begin += per_slab) {
    const int64_t end = std::min(count, begin + per_slab);
    copyIntoPattern(out.narrow(outer, begin, end - begin), slab(begin, end));
  }
  return out;
}

namespace {

c10::IValue batchValue(const NamedTensors& batch) {
  if (batch.tree) return rebuildBatch(*batch.tree, batch.tensors, batch.kept);
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (std::size_t i = 0; i < batch.names.size(); ++i) dict.insert(batch.names[i], batch.tensors[i]);
  return dict;
}

}  // namespace

// torch.save's zip format, streamed record by record (harness/stored_zip.h).
// The batch is pickled untagged: LibTorch's pickle_save tags typed containers
// with torch.jit._pickle.restore_type_tag, which torch.load(...,
// weights_only=True) refuses. Tensors on one storage are written once, as
// views of it; a tensor without data has its storage's bytes produced when
// written.
std::uint64_t writeBatchFile(const NamedTensors& batch, const fs::path& file, const StorageProducers& producers) {
  const c10::IValue value = batchValue(batch);
  std::vector<char> pickle;
  torch::jit::Pickler pickler([&](const char* bytes, size_t n) { pickle.insert(pickle.end(), bytes, bytes + n); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  const fs::path tmp = file.string() + ".partial";
  std::uint64_t bytes = 0;
  std::error_code gone;
  fs::remove(tmp, gone);  // a link left at the name is removed, not written through
  try {
    StoredZipWriter zip(tmp);
    const std::string prefix = "archive/";
    zip.addRecord(prefix + "data.pkl", pickle.size(),
                  [&](const ByteSink& sink) { sink(pickle.data(), pickle.size()); });
    const std::vector<at::Tensor>& storages = pickler.tensorData();
    for (std::size_t key = 0; key < storages.size(); ++key) {
      const at::Tensor& t = storages[key];
      const std::size_t size = t.storage().nbytes();
      zip.addRecord(prefix + "data/" + std::to_string(key), size, [&](const ByteSink& sink) {
        if (t.storage().data() != nullptr || size == 0) return sink(t.storage().data(), size);
        for (std::size_t i = 0; i < batch.tensors.size(); ++i)
          if (batch.tensors[i].defined() &&
              batch.tensors[i].storage().unsafeGetStorageImpl() == t.storage().unsafeGetStorageImpl())
            return producers.at(i)(sink);
        throw std::logic_error("a tensor without data and no producer");
      });
    }
    zip.addRecord(prefix + "version", 2, [](const ByteSink& sink) { sink("3\n", 2); });
    zip.finish();
    bytes = zip.dataBytes();
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  fs::rename(tmp, file);
  return bytes;
}

}  // namespace minrepro
