// Umbrella header of the rfl_fast C++ kernels (header-only, C++17, no dependencies).
// Include path: rfl_fast.get_include(). Every kernel works on one item given as raw row-major
// float64 buffers; loop over a batch yourself (the items are independent, so the loop can be
// split across threads).
#pragma once

#include "linalg_small.hpp"
#include "lorentz.hpp"
#include "sphere.hpp"
#include "spd.hpp"
#include "stiefel.hpp"
