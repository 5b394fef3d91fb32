// devmesh/config/require_cxx17.h
// -----------------------------------------------------------------------------
// Stops a compile that is not C++17 or later with one error naming the fix,
// before any C++17 code (or Abseil's own "C++ versions less than C++14 are
// not supported") can fail in a way that does not say why. Bazel's default
// C++ toolchain compiles with -std=c++0x (C++11) unless told otherwise, so a
// workspace that uses devmesh without importing devmesh's .bazelrc hits this.
//
// devmesh headers include this one first, before the standard library and
// Abseil. The second line GCC and Clang print (a missing include named after
// this check) only ends the compile there, so that no unrelated errors follow.
#ifndef DEVMESH_CONFIG_REQUIRE_CXX17_H_
#define DEVMESH_CONFIG_REQUIRE_CXX17_H_

#if defined(_MSVC_LANG)
#define DEVMESH_INTERNAL_CPLUSPLUS _MSVC_LANG
#else
#define DEVMESH_INTERNAL_CPLUSPLUS __cplusplus
#endif

#if DEVMESH_INTERNAL_CPLUSPLUS < 201703L
#error "devmesh needs C++17: add 'build --cxxopt=-std=c++17 --host_cxxopt=-std=c++17' to your .bazelrc, or import devmesh's ('import %workspace%/path/to/devmesh/.bazelrc')"
#include "devmesh_stops_here_without_cxx17_see_the_error_above"
#endif

#endif  // DEVMESH_CONFIG_REQUIRE_CXX17_H_
