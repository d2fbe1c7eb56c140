// Links four differently built units (see CMakeLists.txt) and checks that each ran its own
// instruction set and its own default backend, with correct results, whatever the link order.
#include <cstdio>
#include <string>

#include "unit.hpp"

#if defined(ABI_HAS_AMX_UNIT)
#include <mqalogits/backend/host/amx/tile_permission.hpp>
#endif

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
#if defined(ABI_HAS_AMX_UNIT)
  // The AMX unit runs where the CPU has its base path (AVX-512 + VNNI): on tiles where the OS
  // grants them, else on that base. Elsewhere (older CPUs, qemu's) it is linked, never called.
  __builtin_cpu_init();
  const bool avx512_vnni =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vnni");
  if (avx512_vnni) {
    const char* isa = mqalogits::host_backend::amx::tile_refusal() ? "avx512_vnni" : "avx512_amx";
    expect("e", abi_unit_e(), isa, "host");
  } else {
    std::printf("unit e: the AMX unit, linked and not run (this CPU has no AVX-512 VNNI)\n");
  }
#endif
  std::printf("%d passed, %d failed\n", passes, failures);
  return failures == 0 ? 0 : 1;
}
