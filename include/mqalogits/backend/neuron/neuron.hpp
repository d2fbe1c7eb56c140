// The neuron backend: a tile-faithful host model of the NeuronCore schedule of the four kernels
// (backend::neuron<trn1 | trn2 | trn3>), with a per-call cost report. A model, not device
// execution: see README "Neuron backend".
#pragma once

#include "candidate_blocks.hpp"
#include "core.hpp"
#include "decode_steps.hpp"
#include "dtype.hpp"
#include "kernels.hpp"
#include "layouts.hpp"
#include "memory.hpp"
#include "native_paged.hpp"
#include "report.hpp"
#include "schedule.hpp"
#include "topk.hpp"
#include "traits.hpp"
