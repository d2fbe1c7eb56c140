// The units of the instruction-set mix test (isa_mix_unit.cpp), each compiled with other flags
// into one program: the baseline (no vector flags), -mavx2 -mfma, and -march=native. Plain C
// types only: a std:: template used here would be instantiated by every unit, under one name, with
// each unit's instructions.
#pragma once

struct isa_mix_result {
  const char* isa = nullptr;  // mqalogits::host_isa_name() as the unit sees it
  const char* tag = nullptr;  // the unit's MQALOGITS_ISA_TAG (the namespace's instruction set)
  int checks = 0;             // results compared with the unit's scalar reference
  int failures = 0;
  char detail[2048] = {};  // what failed, first failures first
};

void isa_mix_base(isa_mix_result& r);
void isa_mix_avx2(isa_mix_result& r);
void isa_mix_native(isa_mix_result& r);
