// One translation unit of the ABI test, compiled several times into one program with different
// flags; each copy exports its own entry (ODR_ENTRY) returning what ran and whether it was right.
#pragma once

#include <string>

struct unit_result {
  std::string isa;       // mqalogits::host_isa_name() as the unit sees it
  std::string backend;   // which backend the tagless entry point ran: "host" or "neuron"
  bool correct = false;  // every logit within the accuracy bound of a float64 reference
  std::string detail;
};

unit_result abi_unit_a();
unit_result abi_unit_b();
unit_result abi_unit_c();
unit_result abi_unit_d();
unit_result abi_unit_e();  // the AMX unit, where built (ABI_HAS_AMX_UNIT)
