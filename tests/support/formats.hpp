// The formats the library ships, in one list: every test case that covers each format iterates
// it (TEMPLATE_LIST_TEST_CASE), so a format added to the library is one line here.
#pragma once

#include <tuple>

#include <mqalogits/format/fp8_per_token.hpp>
#include <mqalogits/format/mx.hpp>

namespace check {

using all_formats = std::tuple<mqalogits::mxfp8, mqalogits::mxfp4, mqalogits::fp8_per_token>;

}  // namespace check
