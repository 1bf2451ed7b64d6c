#include "harness/pickle_budget.h"

#include <array>
#include <cstdlib>
#include <initializer_list>

namespace minrepro {

namespace {

// How an opcode's argument is laid out (pickletools' table, in short).
enum class Arg : std::uint8_t {
  Unknown,   // not an opcode of protocols 0 to 5: stop counting
  None,      // no argument
  Line,      // up to a newline
  TwoLines,  // module and name, each up to a newline
  Fixed,     // `size` bytes
  Counted,   // a little-endian length of `size` bytes, then that many bytes
};

// What an opcode does to the stack: pushes a dict, another container,
// another value, or nothing (memo, framing, appends into what is there).
enum class Push : std::uint8_t { Nothing, Value, Container, Dict };

struct Op {
  Arg arg = Arg::Unknown;
  std::uint8_t size = 0;
  Push push = Push::Nothing;
};

using Codes = std::initializer_list<int>;

constexpr std::array<Op, 256> opTable() {
  std::array<Op, 256> t{};
  const auto set = [&t](int code, Arg arg, std::uint8_t size, Push push) {
    t[static_cast<std::size_t>(code)] = {arg, size, push};
  };
  for (int c : Codes{'(', '.', '0', '1', 'a', 'e', 's', 'u', 'b'}) set(c, Arg::None, 0, Push::Nothing);
  set(0x90, Arg::None, 0, Push::Nothing);  // ADDITEMS
  set(0x94, Arg::None, 0, Push::Nothing);  // MEMOIZE
  for (int c : Codes{'2', 'N', 'Q', 'R', 'o'}) set(c, Arg::None, 0, Push::Value);
  for (int c : Codes{0x88, 0x89, 0x81, 0x92, 0x93, 0x97, 0x98}) set(c, Arg::None, 0, Push::Value);
  for (int c : Codes{'l', ']', 't', ')'}) set(c, Arg::None, 0, Push::Container);
  for (int c : Codes{'d', '}'}) set(c, Arg::None, 0, Push::Dict);
  for (int c : Codes{0x85, 0x86, 0x87, 0x8f, 0x91}) set(c, Arg::None, 0, Push::Container);
  for (int c : Codes{'F', 'I', 'L', 'S', 'V', 'P', 'g'}) set(c, Arg::Line, 0, Push::Value);
  set('p', Arg::Line, 0, Push::Nothing);  // PUT
  for (int c : Codes{'c', 'i'}) set(c, Arg::TwoLines, 0, Push::Value);
  set('K', Arg::Fixed, 1, Push::Value);                                            // BININT1
  set('M', Arg::Fixed, 2, Push::Value);                                            // BININT2
  set('J', Arg::Fixed, 4, Push::Value);                                            // BININT
  set('G', Arg::Fixed, 8, Push::Value);                                            // BINFLOAT
  set('h', Arg::Fixed, 1, Push::Value);                                            // BINGET
  set('j', Arg::Fixed, 4, Push::Value);                                            // LONG_BINGET
  set('q', Arg::Fixed, 1, Push::Nothing);                                          // BINPUT
  set('r', Arg::Fixed, 4, Push::Nothing);                                          // LONG_BINPUT
  set(0x82, Arg::Fixed, 1, Push::Value);                                           // EXT1
  set(0x83, Arg::Fixed, 2, Push::Value);                                           // EXT2
  set(0x84, Arg::Fixed, 4, Push::Value);                                           // EXT4
  set(0x80, Arg::Fixed, 1, Push::Nothing);                                         // PROTO
  set(0x95, Arg::Fixed, 8, Push::Nothing);                                         // FRAME
  for (int c : Codes{'U', 'C', 0x8c, 0x8a}) set(c, Arg::Counted, 1, Push::Value);  // short strings, LONG1
  for (int c : Codes{'T', 'X', 'B', 0x8b}) set(c, Arg::Counted, 4, Push::Value);   // strings, bytes, LONG4
  for (int c : Codes{0x8d, 0x8e, 0x96}) set(c, Arg::Counted, 8, Push::Value);      // 8-byte lengths
  return t;
}

constexpr std::array<Op, 256> kOps = opTable();

std::uint64_t littleEndian(std::string_view bytes) {
  std::uint64_t n = 0;
  for (std::size_t i = bytes.size(); i-- > 0;) n = n << 8 | static_cast<unsigned char>(bytes[i]);
  return n;
}

}  // namespace

std::string overPickleBudget(std::string_view pickle, const PickleBudget& budget) {
  // A text argument: a GLOBAL's module and name, a PUT's index. LibTorch
  // reads one byte by byte until its newline, growing it: a GLOBAL without
  // one took memory until allocation failed, a 1 MB name 72 s (probe 34).
  constexpr std::size_t kMaxLine = 1024;
  std::uint64_t containers = 0, dicts = 0, values = 0, marks = 0;
  std::size_t at = 0;
  std::string why;
  const auto skipLine = [&] {
    const std::size_t end = pickle.find('\n', at);
    if (end == std::string_view::npos)
      why = "a text argument at byte " + std::to_string(at) + " runs to the pickle's end (forged, or cut short)";
    else if (end - at > kMaxLine)
      why = "a text argument at byte " + std::to_string(at) + " is " + std::to_string(end - at) +
            " characters long, where a module's or a class's name is a few dozen";
    else
      at = end + 1;
    return why.empty();
  };
  while (at < pickle.size()) {
    const char code = pickle[at];
    const Op op = kOps[static_cast<unsigned char>(code)];
    if (code == '.' || op.arg == Arg::Unknown) return "";  // STOP, or left to the unpickler
    const std::size_t arg = ++at;
    switch (op.arg) {
      case Arg::Line:
        skipLine();
        break;
      case Arg::TwoLines:
        if (skipLine()) skipLine();
        break;
      case Arg::Fixed:
        if ((at += op.size) > pickle.size()) return "";
        break;
      case Arg::Counted: {
        if (at + op.size > pickle.size()) return "";
        const std::uint64_t length = littleEndian(pickle.substr(at, op.size));
        at += op.size;
        if (length > pickle.size() - at)
          return "it declares a string of " + std::to_string(length) + " bytes where the pickle has " +
                 std::to_string(pickle.size() - at) + " left (forged, or cut short)";
        at += static_cast<std::size_t>(length);
        break;
      }
      default:
        break;
    }
    if (!why.empty()) return why;
    // A memo slot is the count of objects memoized before it, never past the
    // values built so far; LibTorch sizes its memo to the slot it is given
    // (16 bytes a slot: slot 200 000 000 of a 1 KB file took 3.2 GB, probe 34).
    if (code == 'q' || code == 'r' || code == 'p') {
      const std::uint64_t slot = code == 'p'
                                     ? std::strtoull(std::string(pickle.substr(arg, at - arg)).c_str(), nullptr, 10)
                                     : littleEndian(pickle.substr(arg, op.size));
      if (slot > values)
        return "it stores into memo slot " + std::to_string(slot) + " having built " + std::to_string(values) +
               " values (forged: a pickler numbers its slots in order)";
    }
    if (code == '(' && ++marks > budget.max_marks)
      return "it would open more than " + std::to_string(budget.max_marks) +
             " marks (MARK opcodes), far more than a batch's containers";
    if (op.push == Push::Nothing) continue;
    ++values;
    if (op.push == Push::Dict && ++dicts > budget.max_dicts)
      return "it would build more than " + std::to_string(budget.max_dicts) +
             " dicts, far more than a batch's records (each takes LibTorch about 600 bytes)";
    if (op.push != Push::Value && ++containers > budget.max_containers)
      return "it would build more than " + std::to_string(budget.max_containers) +
             " dicts, lists and tuples, where a batch holds at most that many entries in all";
    if (values > budget.max_values)
      return "it would build more than " + std::to_string(budget.max_values) +
             " values (strings, numbers, None), far more than a batch's own";
  }
  return "";
}

}  // namespace minrepro
