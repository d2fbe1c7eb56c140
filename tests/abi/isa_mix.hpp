// The units of the instruction-set mix test (isa_mix_unit.cpp), each compiled with other flags
// into one program: the baseline (no vector flags), -mavx2 -mfma, and -march=native. Plain C
// types only: a std:: template used here would be instantiated by every unit, under one name, with
// each unit's instructions.
#pragma once

#include <cstring>

struct isa_mix_result {
  const char* isa = nullptr;  // mqalogits::host_isa_name() as the unit sees it
  const char* tag = nullptr;  // the unit's MQALOGITS_ISA_TAG (the namespace's instruction set)
  int checks = 0;             // results compared with the unit's scalar reference
  int failures = 0;
  char detail[2048] = {};  // what failed, first failures first
};

// Whether host_isa_name() `isa` names the path of namespace tag `tag` (e.g. "avx2" and "avx2"):
// the same, or the tag with "_vnni" where the name leaves the int8 extension out ("avx512" for
// "avx512_vnni"). (Internal linkage, as everything shared by the units.)
namespace {
inline bool isa_mix_same_path(const char* isa, const char* tag) {
  const std::size_t n = std::strlen(isa);
  return std::strcmp(isa, tag) == 0 ||
         (std::strncmp(isa, tag, n) == 0 && std::strcmp(tag + n, "_vnni") == 0);
}
}  // namespace

void isa_mix_base(isa_mix_result& r);
void isa_mix_avx2(isa_mix_result& r);
void isa_mix_native(isa_mix_result& r);
