// Version of the rfl_fast headers: the same as the Python package's (pyproject.toml; a test
// checks they agree). RFL_FAST_VERSION_HEX compares as a number: 0x000100 is 0.1.0.
#pragma once

#define RFL_FAST_VERSION_MAJOR 0
#define RFL_FAST_VERSION_MINOR 1
#define RFL_FAST_VERSION_PATCH 0
#define RFL_FAST_VERSION_STRING "0.1.0"
#define RFL_FAST_VERSION_HEX \
    ((RFL_FAST_VERSION_MAJOR << 16) | (RFL_FAST_VERSION_MINOR << 8) | RFL_FAST_VERSION_PATCH)
