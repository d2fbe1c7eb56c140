// The instruction-set mix test's program: runs the units named on the command line (base, avx2,
// native; every unit it holds without arguments) and checks that each ran its own host path with
// correct results. A unit the CPU cannot run is a failure, not a skip: the caller names the units
// the CPU has (under qemu-x86_64 -cpu Nehalem: base; -cpu Haswell: base avx2).
//
// Plain C here, as in the units: this file is built with the baseline flags and must not share a
// std:: template instantiation with them.
#include <cstdio>
#include <cstring>

#include "isa_mix.hpp"

#if !defined(ISA_MIX_NATIVE_EXPECT)
#error "define ISA_MIX_NATIVE_EXPECT: the ISA tag -march=native builds, e.g. \"avx512_vnni\""
#endif

namespace {

struct unit {
  const char* name;
  void (*entry)(isa_mix_result&);
  const char* expect;  // ISA tag (MQALOGITS_ISA_TAG) of the flags it was built with
  bool (*cpu_has)();   // whether this CPU runs the unit's instructions
};

bool any_cpu() {
  return true;
}
bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
bool has_native() {  // -march=native: the build machine's instruction set
  __builtin_cpu_init();
  const char* tag = ISA_MIX_NATIVE_EXPECT;
  if (std::strncmp(tag, "avx512", 6) == 0)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           (std::strcmp(tag, "avx512") == 0 || __builtin_cpu_supports("avx512vnni")) &&
           (std::strcmp(tag, "avx512_bf16") != 0 || __builtin_cpu_supports("avx512bf16")) &&
           has_avx2();
  if (std::strncmp(tag, "avx2", 4) == 0) return has_avx2();
  return true;
}

const unit units[] = {
    {"base", isa_mix_base, "portable", any_cpu},
#if defined(ISA_MIX_HAS_AVX2)
    {"avx2", isa_mix_avx2, "avx2", has_avx2},
#endif
    {"native", isa_mix_native, ISA_MIX_NATIVE_EXPECT, has_native},
};

int run(const unit& u, bool unchecked) {
  if (!unchecked && !u.cpu_has()) {
    std::printf("unit %s: this CPU cannot run it: FAILED (name only the units the CPU has)\n",
                u.name);
    return 1;
  }
  isa_mix_result r;
  u.entry(r);
  const bool ok = r.failures == 0 && r.checks > 0 && std::strcmp(r.tag, u.expect) == 0 &&
                  isa_mix_same_path(r.isa, u.expect);
  std::printf(
      "unit %-6s: host path %s (expected %s), namespace tag %s, %d checks, %d failed: %s%s%s\n",
      u.name, r.isa, u.expect, r.tag, r.checks, r.failures, ok ? "passed" : "FAILED",
      r.detail[0] ? "\n  " : "", r.detail);
  return ok ? 0 : 1;
}

}  // namespace

// isa_mix_<order> [--list] [--unchecked] [unit...]
//   --list       print the units this program holds and exit
//   --unchecked  run the named units even when the CPU lacks their instructions (the CI's check
//                that the emulator does refuse them: SIGILL)
int main(int argc, char** argv) {
  bool unchecked = false;
  int named = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--list") == 0) {
      for (const unit& u : units) std::printf("%s\n", u.name);
      return 0;
    }
    if (std::strcmp(argv[i], "--unchecked") == 0)
      unchecked = true;
    else
      ++named;
  }
  int failed = 0, ran = 0;
  for (const unit& u : units) {
    bool wanted = named == 0;
    for (int i = 1; i < argc; ++i) wanted = wanted || std::strcmp(argv[i], u.name) == 0;
    if (!wanted) continue;
    failed += run(u, unchecked);
    ++ran;
  }
  for (int i = 1; i < argc; ++i) {
    bool known = std::strcmp(argv[i], "--unchecked") == 0;
    for (const unit& u : units) known = known || std::strcmp(argv[i], u.name) == 0;
    if (!known) {
      std::printf("no unit '%s' in this program\n", argv[i]);
      ++failed;
    }
  }
  std::printf("%d units ran, %d failed\n", ran, failed);
  return failed == 0 && ran > 0 ? 0 : 1;
}
