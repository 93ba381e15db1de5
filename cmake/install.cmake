# SPDX-License-Identifier: Apache-2.0
# cmake --install: the library (libmega_kws), the public headers, the CLI, the
# benchmark (mega_rtf, where built), the converter (bin/mega-convert), the
# demo model and sample clips; an exported
# CMake package (find_package(MegaKWS), target MegaKWS::mega_kws) and a
# pkg-config file (mega_kws.pc); the Python package mega_kws, told where the
# library and the demo model are. Included from the top-level CMakeLists.txt.
#
# The install components, which are also the Debian packages `cpack -G DEB`
# makes (cmake/packaging.cmake):
#   runtime  libmega_kws.so.N (and the CUDA module)      -> libmega-kwsN
#   dev      headers, CMake package, pkg-config file     -> libmega-kws-dev
#   cli      keyword_spotter, mega_rtf, mega-convert, the demo model, the
#            sample clips, the documentation, libmega_kws_audio.so.N (the
#            microphone's C API: PortAudio, as the CLI)  -> mega-kws
#   python   the Python package mega_kws                 -> python3-mega-kws
include(CMakePackageConfigHelpers)

set(MEGA_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/MegaKWS)
# MEGA_INSTALL_DATADIR and MEGA_BIN_TO_DATA: set in the top-level CMakeLists.txt

install(TARGETS mega_kws EXPORT MegaKWSTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY runtime/include/mega DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(EXPORT MegaKWSTargets NAMESPACE MegaKWS:: DESTINATION ${MEGA_INSTALL_CMAKEDIR} COMPONENT dev)
configure_package_config_file(cmake/MegaKWSConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/MegaKWSConfig.cmake
                              INSTALL_DESTINATION ${MEGA_INSTALL_CMAKEDIR}
                              PATH_VARS MEGA_INSTALL_DATADIR CMAKE_INSTALL_INCLUDEDIR)
# 0.x: a new minor version may change the API
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/MegaKWSConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/MegaKWSConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/MegaKWSConfigVersion.cmake
        DESTINATION ${MEGA_INSTALL_CMAKEDIR} COMPONENT dev)

# pkg-config, relocatable: paths relative to the .pc file's own directory.
file(RELATIVE_PATH MEGA_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" MEGA_PC_TO_PREFIX "${MEGA_PC_TO_PREFIX}")
configure_file(cmake/mega_kws.pc.in ${CMAKE_CURRENT_BINARY_DIR}/mega_kws.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mega_kws.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

if(MEGA_BUILD_APPS)
  install(TARGETS keyword_spotter RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
endif()
# The microphone's C API (mega/mega_kws_audio.h, header with the others): with
# the CLI, which brings PortAudio too, so that libmega-kwsN needs none. Not in
# the exported CMake package (libmega-kws-dev would name a file of mega-kws).
if(TARGET mega_kws_audio)
  set_target_properties(mega_kws_audio PROPERTIES INSTALL_RPATH "$ORIGIN")  # libmega_kws beside it, in any prefix
  install(TARGETS mega_kws_audio LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT cli NAMELINK_COMPONENT cli)
endif()
if(TARGET mega_rtf)
  install(TARGETS mega_rtf RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
endif()
install(FILES models/sc10-demo.mega models/sc10-teacher.mega DESTINATION ${MEGA_INSTALL_DATADIR}/models COMPONENT cli)
install(DIRECTORY samples/ DESTINATION ${MEGA_INSTALL_DATADIR}/samples COMPONENT cli FILES_MATCHING PATTERN "*.wav")

# The converter: the modules of the package mega_kws_tools (tools/) that it
# needs, as in the source tree, under share/mega_kws/tools/mega_kws_tools, run
# by a small wrapper in bin that finds them relative to itself.
install(FILES tools/mega_kws_tools/__init__.py tools/mega_kws_tools/hashing.py DESTINATION ${MEGA_INSTALL_DATADIR}/tools/mega_kws_tools COMPONENT cli)
install(DIRECTORY tools/mega_kws_tools/model/ DESTINATION ${MEGA_INSTALL_DATADIR}/tools/mega_kws_tools/model
        COMPONENT cli FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(FILES tools/mega_kws_tools/convert/__init__.py tools/mega_kws_tools/convert/mega_convert.py
              tools/mega_kws_tools/convert/mega_format.py tools/mega_kws_tools/convert/check_official.py
              tools/mega_kws_tools/convert/fp16_peaks.py
        DESTINATION ${MEGA_INSTALL_DATADIR}/tools/mega_kws_tools/convert COMPONENT cli)
install(DIRECTORY tools/mega_kws_tools/convert/schema/ DESTINATION ${MEGA_INSTALL_DATADIR}/tools/mega_kws_tools/convert/schema
        COMPONENT cli FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
configure_file(cmake/mega-convert.in ${CMAKE_CURRENT_BINARY_DIR}/mega-convert @ONLY)
install(PROGRAMS ${CMAKE_CURRENT_BINARY_DIR}/mega-convert DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
# The documentation, laid out as in the source tree so that its relative links
# resolve (scripts/check_doc_links.py, run by scripts/test_install.sh): the
# README, docs/, the example and the CUDA backend's notes the README links to,
# the license and NOTICE (the data credits).
install(FILES README.md LICENSE NOTICE DESTINATION ${MEGA_INSTALL_DOCDIR} COMPONENT cli)
install(DIRECTORY docs/ DESTINATION ${MEGA_INSTALL_DOCDIR}/docs COMPONENT cli)
install(FILES examples/embed/CMakeLists.txt examples/embed/embed_kws.c
        DESTINATION ${MEGA_INSTALL_DOCDIR}/examples/embed COMPONENT cli)
install(FILES kernels/cuda/README.md DESTINATION ${MEGA_INSTALL_DOCDIR}/kernels/cuda COMPONENT cli)

# The Python package (python/mega_kws): its sources, and a _config.py written
# at install time (so it follows --prefix and DESTDIR) with the installed
# library's and demo model's paths. The default directory is Debian's for
# /usr (lib/python3/dist-packages); elsewhere, add it to PYTHONPATH.
set(MEGA_PYTHON_INSTALL_DIR lib/python3/dist-packages CACHE STRING
    "Where cmake --install puts the Python package mega_kws (relative to the prefix, or absolute)")
install(DIRECTORY python/mega_kws DESTINATION ${MEGA_PYTHON_INSTALL_DIR} COMPONENT python
        FILES_MATCHING PATTERN "*.py" PATTERN "_config.py" EXCLUDE PATTERN "__pycache__" EXCLUDE)
set(MEGA_SONAME ${CMAKE_SHARED_LIBRARY_PREFIX}mega_kws${CMAKE_SHARED_LIBRARY_SUFFIX}.${PROJECT_VERSION_MAJOR})
configure_file(cmake/write_python_config.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/write_python_config.cmake @ONLY)
install(SCRIPT ${CMAKE_CURRENT_BINARY_DIR}/write_python_config.cmake COMPONENT python)

include(${CMAKE_CURRENT_LIST_DIR}/packaging.cmake)
