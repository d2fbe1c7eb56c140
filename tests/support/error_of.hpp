// The message of the mqalogits::error fn throws, or "" when it throws none: tests assert on
// what a caller would read. And expect_error, the check built on it.
#pragma once

#include <catch2/catch.hpp>

#include <initializer_list>
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

// fn must throw an mqalogits::error whose message contains every part.
template <class Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> parts) {
  const std::string message = error_of(fn);
  if (message.empty()) FAIL("no mqalogits::error thrown; expected one naming " << *parts.begin());
  INFO("message: " << message);
  for (const std::string& p : parts) CHECK_THAT(message, Catch::Contains(p));
}

}  // namespace check
