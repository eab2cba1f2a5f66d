# Version check of find_package(rfl_fast <version>): the version is read from rfl/version.hpp;
# any later version of the same major version is compatible.
file(STRINGS "${CMAKE_CURRENT_LIST_DIR}/../include/rfl/version.hpp" _rfl_fast_version
     REGEX "^#define RFL_FAST_VERSION_STRING ")
string(REGEX REPLACE ".*\"([^\"]+)\".*" "\\1" PACKAGE_VERSION "${_rfl_fast_version}")
unset(_rfl_fast_version)

if(PACKAGE_FIND_VERSION)
  string(REGEX MATCH "^[0-9]+" _rfl_fast_major "${PACKAGE_VERSION}")
  if(PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION
     OR NOT PACKAGE_FIND_VERSION_MAJOR STREQUAL _rfl_fast_major)
    set(PACKAGE_VERSION_COMPATIBLE FALSE)
  else()
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
    if(PACKAGE_VERSION VERSION_EQUAL PACKAGE_FIND_VERSION)
      set(PACKAGE_VERSION_EXACT TRUE)
    endif()
  endif()
  unset(_rfl_fast_major)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
