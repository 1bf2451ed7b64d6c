// Running a recursive job on a stack sized for the worst input it accepts.
//
// LibTorch frees an IValue recursively: a list inside a list inside a list
// frees each level in a nested destructor call. A 200 KB batch of 200 000
// tuples nested in one another (well under the pickle budget's 1 000 000
// containers, harness/pickle_budget.h) overflowed the main thread's 8 MB
// stack when minrepro dropped it after refusing it as too deep: a segfault
// instead of exit 2, and compare's scratch directory left behind (probe 32).
// LibTorch's code cannot be made iterative from here, so the reading runs
// where the deepest nesting the budget allows fits: about 50 bytes of stack
// per level, 1 000 000 levels at most, on a 256 MiB stack whose pages are
// only touched as deep as the batch goes.
#pragma once

#include <functional>

namespace minrepro {

// Runs `work` to its end on a thread with a 256 MiB stack and rethrows what
// it threw. Where that stack cannot be reserved (an address-space limit),
// runs it on the caller's stack.
void runOnDeepStack(const std::function<void()>& work);

}  // namespace minrepro
