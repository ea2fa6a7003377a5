/*
 * refgate's version: the one definition, CMake's project(VERSION), passed
 * in by util/CMakeLists.txt to everything that links rg_util. `refgate
 * --version` prints it and the gateway names itself with it upstream, so
 * the two cannot drift apart.
 */
#ifndef RG_UTIL_VERSION_H
#define RG_UTIL_VERSION_H

#ifndef REFGATE_VERSION
#error "REFGATE_VERSION comes from CMake's project(VERSION) (util/CMakeLists.txt)"
#endif

#define RG_VERSION REFGATE_VERSION

#endif
