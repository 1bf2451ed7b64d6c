// Candidates of tensors that share a storage (see the header for why).
#include "harness/shared_storage.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

namespace minrepro {

std::vector<std::vector<std::size_t>> storageGroups(const std::vector<at::Tensor>& tensors) {
  std::vector<std::vector<std::size_t>> groups;
  std::vector<bool> placed(tensors.size(), false);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (placed[i]) continue;
    groups.push_back({i});
    for (std::size_t j = i + 1; j < tensors.size(); ++j)
      if (!placed[j] && tensors[j].storage().is_alias_of(tensors[i].storage())) {
        groups.back().push_back(j);
        placed[j] = true;
      }
  }
  return groups;
}

namespace {

// Where sample k's bytes lie in the storage: [begin + k * size, begin + (k + 1) * size).
struct SampleBlocks {
  std::int64_t begin = 0;
  std::int64_t size = 0;
};

// The views' common sample blocks, when each view has a sample axis of
// `sample_count` samples, the same sample stride in bytes, no negative
// stride, and each of its samples inside its block.
std::optional<SampleBlocks> sampleBlocksOf(const std::vector<at::Tensor>& views, const std::vector<ViewCut>& cuts,
                                           std::int64_t sample_count) {
  std::optional<std::int64_t> stride;
  std::int64_t begin = INT64_MAX;
  std::vector<std::int64_t> ends;  // per view, the end of its sample 0's bytes
  for (std::size_t v = 0; v < views.size(); ++v) {
    const at::Tensor& t = views[v];
    if (!cuts[v].sample_axis || t.size(*cuts[v].sample_axis) != sample_count) return std::nullopt;
    const int axis = *cuts[v].sample_axis;
    const std::int64_t item = static_cast<std::int64_t>(t.element_size());
    const std::int64_t sample_stride = t.stride(axis) * item;
    if (sample_stride <= 0 || (stride && *stride != sample_stride)) return std::nullopt;
    stride = sample_stride;
    std::int64_t extent = item;
    for (int d = 0; d < t.dim(); ++d) {
      if (t.stride(d) < 0) return std::nullopt;
      if (d != axis) extent += (t.size(d) - 1) * t.stride(d) * item;
    }
    const std::int64_t offset = t.storage_offset() * item;
    begin = std::min(begin, offset);
    ends.push_back(offset + extent);
  }
  if (!stride) return std::nullopt;
  for (std::int64_t end : ends)
    if (end > begin + *stride) return std::nullopt;
  return SampleBlocks{begin, *stride};
}

// The storage's bytes with only the kept samples' blocks: what comes before
// the first block, the kept blocks in order, what comes after the last.
// The last block of the original may be short (the storage ends with the
// last view's last element): it stays short where it stays last.
at::Tensor keptBlocks(const c10::Storage& storage, const SampleBlocks& blocks, const std::vector<std::int64_t>& samples,
                      std::int64_t sample_count) {
  const auto nbytes = static_cast<std::int64_t>(storage.nbytes());
  const auto* from = static_cast<const char*>(storage.data());
  const std::int64_t tail_begin = blocks.begin + sample_count * blocks.size;
  const std::int64_t tail = std::max<std::int64_t>(0, nbytes - tail_begin);
  std::int64_t total = blocks.begin + static_cast<std::int64_t>(samples.size()) * blocks.size + tail;
  if (!samples.empty() && samples.back() == sample_count - 1) total -= std::max<std::int64_t>(0, tail_begin - nbytes);
  at::Tensor bytes = at::zeros({total}, at::kByte);
  char* to = reinterpret_cast<char*>(bytes.data_ptr<std::uint8_t>());
  std::memcpy(to, from, static_cast<std::size_t>(blocks.begin));
  std::int64_t at = blocks.begin;
  for (std::int64_t k : samples) {
    const std::int64_t start = blocks.begin + k * blocks.size;
    std::memcpy(to + at, from + start, static_cast<std::size_t>(std::min(blocks.size, nbytes - start)));
    at += blocks.size;
  }
  if (tail > 0) std::memcpy(to + at, from + tail_begin, static_cast<std::size_t>(tail));
  return bytes;
}

at::Tensor wholeCopy(const c10::Storage& storage) {
  at::Tensor bytes = at::empty({static_cast<std::int64_t>(storage.nbytes())}, at::kByte);
  if (storage.nbytes() > 0) std::memcpy(bytes.data_ptr(), storage.data(), storage.nbytes());
  return bytes;
}

// View `t` cut as `cut` says, on `storage` laid out as the original's.
at::Tensor viewOn(const at::Tensor& bytes, const at::Tensor& t, const ViewCut& cut, std::int64_t kept) {
  std::vector<std::int64_t> sizes = t.sizes().vec();
  std::int64_t offset = t.storage_offset();
  if (cut.sample_axis) sizes[static_cast<std::size_t>(*cut.sample_axis)] = kept;
  if (cut.sequence_axis && cut.window_end > 0) {
    sizes[static_cast<std::size_t>(*cut.sequence_axis)] = cut.window_end - cut.window_begin;
    offset += cut.window_begin * t.stride(*cut.sequence_axis);
  }
  return at::empty({0}, t.options()).set_(bytes.storage(), offset, sizes, t.strides());
}

}  // namespace

std::optional<std::vector<at::Tensor>> cutSharedStorage(const std::vector<at::Tensor>& views,
                                                        const std::vector<ViewCut>& cuts,
                                                        const std::vector<std::int64_t>& samples,
                                                        std::int64_t sample_count) {
  const c10::Storage& storage = views.front().storage();
  const auto kept = static_cast<std::int64_t>(samples.size());
  bool samples_cut = false;
  for (const ViewCut& cut : cuts) samples_cut = samples_cut || (cut.sample_axis && kept != sample_count);
  at::Tensor bytes;
  if (!samples_cut) {
    bytes = wholeCopy(storage);
  } else if (auto blocks = sampleBlocksOf(views, cuts, sample_count)) {
    bytes = keptBlocks(storage, *blocks, samples, sample_count);
  } else {
    return std::nullopt;
  }
  std::vector<at::Tensor> out;
  for (std::size_t v = 0; v < views.size(); ++v) out.push_back(viewOn(bytes, views[v], cuts[v], kept));
  return out;
}

}  // namespace minrepro
