# CMake package of the rfl_fast C++ headers (header-only). Use:
#   find_package(rfl_fast CONFIG REQUIRED)   # -Drfl_fast_DIR=$(python -m rfl_fast --cmake-dir)
#   target_link_libraries(my_target PRIVATE rfl_fast::headers)
# Sets rfl_fast_INCLUDE_DIRS and rfl_fast_VERSION (from rfl/version.hpp) as well.
include(CMakeFindDependencyMacro)
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_dependency(Threads)

get_filename_component(rfl_fast_INCLUDE_DIRS "${CMAKE_CURRENT_LIST_DIR}/../include" ABSOLUTE)
include("${CMAKE_CURRENT_LIST_DIR}/rfl_fastConfigVersion.cmake")
set(rfl_fast_VERSION "${PACKAGE_VERSION}")

if(NOT TARGET rfl_fast::headers)
  add_library(rfl_fast::headers INTERFACE IMPORTED)
  set_target_properties(rfl_fast::headers PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${rfl_fast_INCLUDE_DIRS}"
    INTERFACE_COMPILE_FEATURES cxx_std_17
    # GCC's note on the 32-byte vector ABI of always-inlined helpers (see rfl/simd.hpp)
    INTERFACE_COMPILE_OPTIONS "$<$<CXX_COMPILER_ID:GNU>:-Wno-psabi>"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
