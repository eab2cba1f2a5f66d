// Umbrella header of the rfl_fast C++ kernels (header-only, C++17, no dependencies).
// Include path: rfl_fast.get_include() (CMake: find_package(rfl_fast) with
// rfl_fast.get_cmake_dir(); pkg-config: rfl_fast.pc in rfl_fast.get_pkgconfig_dir()).
// Every kernel works on one item given as raw row-major float64 buffers; batch.hpp loops
// them over a batch across threads (link with -pthread), as the Python extension does.
// blas.hpp: hand the kernels a BLAS / LAPACK (function pointers) for their large-size paths.
#pragma once

#include "batch.hpp"
#include "brockett.hpp"
#include "blas.hpp"
#include "linalg_small.hpp"
#include "lorentz.hpp"
#include "pca.hpp"
#include "simd.hpp"
#include "sphere.hpp"
#include "spd.hpp"
#include "stiefel.hpp"
#include "stiefel_exp.hpp"
#include "version.hpp"
