// The AMX path of Sapphire Rapids and later Xeons: isa_avx512 (with VNNI) for everything but
// the score steps of the e4m3 formats and MXFP4, which run on the tile units (TDPBF16PS,
// TDPBSSD; isa/amx_path.hpp). Compiled only where a unit opts in (target.hpp's
// MQALOGITS_HOST_AMX) and chosen at run time only where the OS grants the tile state.
#pragma once

#include "../../../config.hpp"
#include "../amx/tile_native.hpp"
#include "amx_path.hpp"
#include "avx512.hpp"

#if defined(MQALOGITS_HOST_AMX)
MQALOGITS_NAMESPACE_BEGIN
namespace host_backend {

using isa_avx512_amx = amx_path<isa_avx512, amx::tile_native>;

}  // namespace host_backend
MQALOGITS_NAMESPACE_END
#endif
