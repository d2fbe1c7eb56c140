// The message of the mqalogits::error fn throws, or "" when it throws none: tests assert on
// what a caller would read.
#pragma once

#include <string>

#include <mqalogits/mqalogits.hpp>

namespace check {

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const mqalogits::error& e) {
    return e.what();
  }
  return "";
}

}  // namespace check
