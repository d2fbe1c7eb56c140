// The library against the independent float64 golden cases, on every kernel and both formats.
#include <catch2/catch.hpp>

#include <mqalogits/mqalogits.hpp>

#include "support/golden.hpp"

namespace ml = mqalogits;

TEST_CASE("golden cases: every kernel x format matches the float64 reference", "[golden]") {
  const std::string name = GENERATE(from_range(golden::case_names()));
  const int threads = GENERATE(1, 2);
  ml::thread_pool pool(threads);
  const ml::options opt{.executor = pool};
  const auto c = golden::load_case(name);
  INFO(name << ", " << threads << " threads");
  CHECK(golden::check_case<ml::backend::host, ml::bf16>(c, opt) == "");
  CHECK(golden::check_case<ml::backend::host, float>(c, opt) == "");
}
