// Native hooks for the Python fork server's children (harness/py_fork_server.py
// loads this library with ctypes). Only c10 is linked: loading it into an
// interpreter that imported torch adds nothing but these functions.
#include <c10/util/Logging.h>

#include <string>

// A c10::Error symbolises the C++ stack when it is made (dladdr over ~290
// libraries: 8-12 ms per failing trial here), and torch prints that stack
// only when TORCH_SHOW_CPP_STACKTRACES=1. The server calls this in a child
// whose environment does not ask for it: the Python exception and its text
// are unchanged.
extern "C" void minrepro_skip_cpp_stack_traces() {
  c10::SetStackTraceFetcher([] { return std::string(); });
}
