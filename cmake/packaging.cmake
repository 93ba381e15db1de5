# SPDX-License-Identifier: Apache-2.0
# Debian packages of the install components (cmake/install.cmake), made by
#   cpack -G DEB --config BUILD/CPackConfig.cmake -B BUILD
# (scripts/test_packages.sh). Configure with -DCMAKE_INSTALL_PREFIX=/usr so
# the library goes to Debian's multiarch directory (/usr/lib/<triplet>); the
# packages always install under /usr. The architecture is the build's: amd64
# natively, arm64 from the aarch64 cross build (scripts/test_cross.sh).
#
#   libmega-kwsN      libmega_kws.so.N (and libmega_kws_cuda.so with MEGA_CUDA)
#   libmega-kws-dev   headers, CMake package MegaKWS, mega_kws.pc
#   mega-kws          keyword_spotter, mega_rtf, mega-convert, demo model, samples, libmega_kws_audio.so.N
#   python3-mega-kws  the Python package mega_kws (finds the library and model above)
#
# Dependencies on Debian's libraries (libopenblas0, libsndfile1,
# libsamplerate0, libportaudio2, libc6, ...) come from dpkg-shlibdeps where it
# can read the programs; in a cross build (or without dpkg-shlibdeps) they are
# the explicit lists below.
set(MEGA_DEB_VERSION ${PROJECT_VERSION})
set(MEGA_DEB_LIB libmega-kws${PROJECT_VERSION_MAJOR})

set(CPACK_PACKAGE_NAME mega-kws)
set(CPACK_PACKAGE_VENDOR "mega-kws")
set(CPACK_PACKAGE_CONTACT "mega-kws maintainers <mega-kws@users.noreply.github.com>")
set(CPACK_PACKAGE_VERSION ${MEGA_DEB_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev cli python)
# DESTDIR staging, so that the Python package's _config.py (written at install
# time from CMAKE_INSTALL_PREFIX) names /usr, not CPack's staging directory.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
if(NOT CMAKE_INSTALL_PREFIX MATCHES "^/usr/?$")
  message(STATUS "Debian packages (cpack) install under /usr with the library in /usr/${CMAKE_INSTALL_LIBDIR}: "
                 "configure with -DCMAKE_INSTALL_PREFIX=/usr for Debian's multiarch directory")
endif()

if(CMAKE_CROSSCOMPILING)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    set(MEGA_DEB_ARCH arm64)
  else()
    set(MEGA_DEB_ARCH ${CMAKE_SYSTEM_PROCESSOR})
  endif()
else()
  find_program(MEGA_DPKG dpkg)
  if(MEGA_DPKG)
    execute_process(COMMAND ${MEGA_DPKG} --print-architecture OUTPUT_VARIABLE MEGA_DEB_ARCH
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
  else()
    set(MEGA_DEB_ARCH amd64)
  endif()
endif()
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${MEGA_DEB_ARCH})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # NAME_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION sound)
set(CPACK_STRIP_FILES ON)  # Debian ships stripped programs and libraries

# What Debian asks of every package (scripts/test_packages.sh runs lintian):
# its own /usr/share/doc/<package> with the license in the machine-readable
# copyright format and the changelog (a native package: changelog.gz,
# compressed with gzip -9n so that it is the same on every build). The first
# entry of cmake/debian/changelog must name PROJECT_VERSION.
set(MEGA_DEB_DIR ${PROJECT_SOURCE_DIR}/cmake/debian)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${MEGA_DEB_DIR}/changelog)
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/debian)
execute_process(COMMAND gzip -9n -c ${MEGA_DEB_DIR}/changelog OUTPUT_FILE ${PROJECT_BINARY_DIR}/debian/changelog.gz
                RESULT_VARIABLE MEGA_GZIP_RESULT)
if(NOT MEGA_GZIP_RESULT EQUAL 0)
  message(FATAL_ERROR "gzip -9n of ${MEGA_DEB_DIR}/changelog failed: ${MEGA_GZIP_RESULT}")
endif()
foreach(pair runtime:${MEGA_DEB_LIB} dev:libmega-kws-dev cli:mega-kws python:python3-mega-kws)
  string(REPLACE ":" ";" pair ${pair})
  list(GET pair 0 component)
  list(GET pair 1 package)
  install(FILES ${MEGA_DEB_DIR}/copyright ${PROJECT_BINARY_DIR}/debian/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${package} COMPONENT ${component})
endforeach()
install(FILES ${MEGA_DEB_DIR}/libmega-kws.lintian-overrides DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides
        RENAME ${MEGA_DEB_LIB} COMPONENT runtime)
install(FILES ${MEGA_DEB_DIR}/mega-kws.lintian-overrides DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides
        RENAME mega-kws COMPONENT cli)

find_program(MEGA_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(MEGA_DPKG_SHLIBDEPS AND NOT CMAKE_CROSSCOMPILING)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  # libmega_kws.so.N is this project's (no Debian package knows it): the
  # programs' dependency on it is the explicit one below.
  # (With MEGA_CUDA, libmega_kws_cuda.so in libmega-kwsN links the CUDA
  # runtime and cuBLAS: their packages, if dpkg knows them, are added the same
  # way; this has not been tried.)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})
  set(MEGA_DEB_LIB_DEPENDS "")
  set(MEGA_DEB_CLI_DEPENDS "")
else()
  # What the library and the programs link: the list dpkg-shlibdeps makes
  # of the amd64 build on Debian 12.
  set(MEGA_DEB_LIB_DEPENDS "libc6 (>= 2.33), libgcc-s1 (>= 3.0), libopenblas0, libstdc++6 (>= 11), ")
  string(CONCAT MEGA_DEB_CLI_DEPENDS "libc6 (>= 2.34), libgcc-s1 (>= 3.0), libopenblas0, libportaudio2 (>= 19+svn20101113), "
                                     "libsamplerate0 (>= 0.1.7), libsndfile1 (>= 1.0.20), libstdc++6 (>= 11), ")
endif()

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME ${MEGA_DEB_LIB})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "Mega-chunk keyword spotting runtime (shared library)
libmega_kws: the C API (mega/mega_kws.h) and the C++ API (mega/mega.hpp,
mega/engine.hpp, mega/detector.hpp) of the mega-kws streaming keyword
spotting runtime, with its CPU backend.")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "${MEGA_DEB_LIB_DEPENDS}")
string(REGEX REPLACE ", $" "" CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "${CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS}")
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # DEBIAN/shlibs of libmega-kwsN, for packages linking it
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${MEGA_DEB_DIR}/triggers)  # ldconfig after install and removal
set(CPACK_DEBIAN_CLI_PACKAGE_CONTROL_EXTRA ${MEGA_DEB_DIR}/triggers)  # mega-kws carries libmega_kws_audio.so.N
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libmega-kws-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "Mega-chunk keyword spotting runtime (development files)
Headers of the C and C++ APIs, the CMake package MegaKWS
(find_package(MegaKWS), target MegaKWS::mega_kws) and the pkg-config
file mega_kws.pc.")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${MEGA_DEB_LIB} (= ${MEGA_DEB_VERSION})")

set(CPACK_DEBIAN_CLI_PACKAGE_NAME mega-kws)
set(CPACK_DEBIAN_CLI_DESCRIPTION "Mega-chunk keyword spotting: command line and demo model
keyword_spotter (classify, scan, listen on a microphone, info, selftest),
the benchmark mega_rtf, the checkpoint converter mega-convert, the demo
model for the ten Speech Commands keywords and sample clips.")
set(CPACK_DEBIAN_CLI_PACKAGE_DEPENDS "${MEGA_DEB_CLI_DEPENDS}${MEGA_DEB_LIB} (= ${MEGA_DEB_VERSION})")
# mega-convert runs PyTorch
set(CPACK_DEBIAN_CLI_PACKAGE_SUGGESTS "python3, python3-torch, python3-numpy, python3-flatbuffers")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-mega-kws)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_DESCRIPTION "Mega-chunk keyword spotting from Python
The package mega_kws: ctypes over libmega_kws, NumPy in and out; told
where the packaged library and demo model are.")
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3, python3-numpy, ${MEGA_DEB_LIB} (= ${MEGA_DEB_VERSION})")
set(CPACK_DEBIAN_PYTHON_PACKAGE_RECOMMENDS "mega-kws")  # the demo model

include(CPack)
