// The default backend, chosen once per build by MQALOGITS_BACKEND_HOST / _NEURON (CMake's
// MQALOGITS_BACKEND cache variable sets one of them).
#pragma once

#include "../config.hpp"
#include "backend.hpp"
#include "host/driver.hpp"

MQALOGITS_NAMESPACE_BEGIN
#if defined(MQALOGITS_BACKEND_NEURON)
#error "mqalogits: the neuron backend is not built yet"
#else
using default_backend = backend::host;
#endif
MQALOGITS_NAMESPACE_END
