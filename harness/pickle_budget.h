// What a batch's pickle would build, counted before it is built.
//
// LibTorch's unpickler builds every object a pickle describes before
// minrepro can look at one: a 36 MB file of six million empty dicts took
// 2.9 GB to read, and only then did the batch's 1 000 000-entry cap refuse
// it (probe 30). So the pickle's opcodes are walked first, without building
// anything, and a pickle that would build more containers than a batch may
// hold, or more values than a batch plausibly has, is refused unread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace minrepro {

struct PickleBudget {
  // Dicts, lists, tuples and sets: a batch holds at most 1 000 000 entries
  // in its containers (harness/batch_tree.cc), so more containers than
  // that can never be read.
  std::uint64_t max_containers = 1'000'000;
  // Dicts, of those: LibTorch's empty dict takes about 600 bytes where a
  // list takes about 100, so a million of them took 0.7 GB to read (1.1 GB
  // nested, probe 32). A batch's dicts are its own and its samples' records:
  // thousands, not hundreds of thousands.
  std::uint64_t max_dicts = 250'000;
  // Every value pushed (strings, numbers, None, containers, tensors'
  // rebuild arguments): room for the 1 000 000 entries a batch may hold
  // and 100 000 tensors' rebuild arguments. Each takes LibTorch about 120
  // bytes: 8 000 000 empty strings, a 40 MB file, took 0.99 GB (probe 33);
  // 3 000 000 keep reading under about 500 MB.
  std::uint64_t max_values = 3'000'000;
  // MARKs: each is taken by the container it builds or the items it adds,
  // so a batch's are about its containers and its tensors' argument tuples.
  // LibTorch keeps every one until then: 250 000 000 of them, a 250 MB
  // pickle, took 2.4 GB to read (probe 36).
  std::uint64_t max_marks = 2'000'000;
};

// Walks the opcodes of `pickle` (protocols 0 to 5). Returns what is over
// the budget in words ("it would build 6000000 dicts, lists and tuples (at
// most 1000000)"), or a string or bytes longer than what follows it in the
// pickle (the unpickler allocates the length it is told before it reads:
// 2 GB for a 1.4 KB file, probe 33), a text argument without its newline
// or over 1024 characters, a memo slot past the values built so far
// (LibTorch sizes its memo to it), or "" when it is within the budget, or
// when an opcode is not understood: the unpickler then says what is wrong
// in its own words.
std::string overPickleBudget(std::string_view pickle, const PickleBudget& budget = {});

}  // namespace minrepro
