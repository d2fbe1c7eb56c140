// mqalogits with the NeuronCore model: everything <mqalogits/mqalogits.hpp> declares, plus
// backend::neuron<trn1 | trn2 | trn3> (a tile-faithful host model of the NeuronCore schedule
// with a cost report) and its neuron_backend:: helpers. Kept out of the main header so that
// host-only users do not parse the model; a build whose default backend is neuron
// (MQALOGITS_BACKEND_NEURON) gets it from either header.
#pragma once

#include "backend/neuron/neuron.hpp"
#include "mqalogits.hpp"
