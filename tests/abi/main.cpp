// Links four differently built units (see CMakeLists.txt) and checks that each ran its own
// instruction set and its own default backend, with correct results, whatever the link order.
#include <cstdio>
#include <string>

#include "unit.hpp"

namespace {

int failures = 0, passes = 0;

void expect(const char* unit, const unit_result& r, const char* isa, const char* backend) {
  const bool ok = r.correct && r.isa == isa && r.backend == backend;
  std::printf("unit %s: isa %s (expected %s), default backend %s (expected %s), results %s %s\n",
              unit, r.isa.c_str(), isa, r.backend.c_str(), backend, r.correct ? "correct" : "WRONG",
              r.detail.c_str());
  (ok ? passes : failures)++;
}

}  // namespace

int main() {
  expect("a", abi_unit_a(), ABI_ISA_A, "host");
  expect("b", abi_unit_b(), ABI_ISA_B, "host");
  expect("c", abi_unit_c(), ABI_ISA_B, "neuron");
  expect("d", abi_unit_d(), ABI_ISA_B, "host");
  std::printf("%d passed, %d failed\n", passes, failures);
  return failures == 0 ? 0 : 1;
}
