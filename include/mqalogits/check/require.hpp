// The one check every entry point is built from, public for code that adds checks of its own
// (bindings, op libraries, engines): check::require(ok, where, describe) throws mqalogits::error
// "<where>: <text>" when ok is false, the text written by describe(m) (m << "x = " << x), which
// only runs then. `where` is the function's name as users call it, so a refusal reads the same
// from every surface.
#pragma once

#include "../config.hpp"
#include "../error.hpp"

MQALOGITS_NAMESPACE_BEGIN
namespace check {

using detail::require;
// A "where" of three parts, e.g. where3{"neuron model (", name, ")"}, written only on failure.
using detail::where3;

}  // namespace check
MQALOGITS_NAMESPACE_END
