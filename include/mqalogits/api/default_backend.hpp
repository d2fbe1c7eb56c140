// The default backend, chosen once per build by MQALOGITS_BACKEND_HOST / _NEURON (CMake's
// MQALOGITS_BACKEND cache variable sets one of them); for neuron, the generation by one of
// MQALOGITS_NEURON_GEN_TRN1 / _TRN2 / _TRN3 (CMake's MQALOGITS_NEURON_GEN; trn2 if none).
#pragma once

#include "../backend/backend.hpp"
#include "../backend/host/driver.hpp"
#include "../config.hpp"

#if defined(MQALOGITS_BACKEND_NEURON)
#if (defined(MQALOGITS_NEURON_GEN_TRN1) + defined(MQALOGITS_NEURON_GEN_TRN2) + \
     defined(MQALOGITS_NEURON_GEN_TRN3)) > 1
#error "mqalogits: more than one of MQALOGITS_NEURON_GEN_TRN1 / _TRN2 / _TRN3 is defined; pick one"
#endif
#include "../backend/neuron/neuron.hpp"
#endif

MQALOGITS_NAMESPACE_BEGIN
#if defined(MQALOGITS_BACKEND_NEURON)
#if defined(MQALOGITS_NEURON_GEN_TRN1)
using default_backend = backend::neuron<backend::trn1>;
#elif defined(MQALOGITS_NEURON_GEN_TRN3)
using default_backend = backend::neuron<backend::trn3>;
#else
using default_backend = backend::neuron<backend::trn2>;
#endif
#else
using default_backend = backend::host;
#endif
MQALOGITS_NAMESPACE_END
