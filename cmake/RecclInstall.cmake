# What `cmake --install` puts where (GNUInstallDirs), in three components:
#   runtime      libreccl.so.0, the `reccl` CLI, reccl-bench
#   development  reccl.h and reccl.hpp, libreccl.so, reccl.pc, the CMake package (find_package(reccl))
#   doc          README and docs/, the examples (sources and their CMakeLists.txt)
# The node daemon's own lines live beside it (detector/daemon/).
include(CMakePackageConfigHelpers)

set(RECCL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/reccl)

# Installed programs find libreccl.so.0 beside them in the prefix, wherever it is.
file(RELATIVE_PATH _reccl_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
foreach(tool reccl-bench)
  if(TARGET ${tool})
    set_target_properties(${tool} PROPERTIES INSTALL_RPATH "$ORIGIN/${_reccl_bin_to_lib}")
  endif()
endforeach()

install(TARGETS reccl_shared EXPORT recclTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT development)
install(FILES ccl/include/reccl/reccl.h ccl/include/reccl/reccl.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/reccl COMPONENT development)
foreach(tool reccl reccl-bench)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
  endif()
endforeach()

install(EXPORT recclTargets NAMESPACE reccl:: DESTINATION ${RECCL_CMAKE_DIR} COMPONENT development)
configure_package_config_file(cmake/recclConfig.cmake.in ${CMAKE_BINARY_DIR}/recclConfig.cmake
                              INSTALL_DESTINATION ${RECCL_CMAKE_DIR})
# 0.x: a new minor version may change the API, so only the same major.minor satisfies a request.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/recclConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/recclConfig.cmake ${CMAKE_BINARY_DIR}/recclConfigVersion.cmake
        DESTINATION ${RECCL_CMAKE_DIR} COMPONENT development)

# reccl.pc names its prefix relative to where it lies (${pcfiledir}), so a tree installed with
# `cmake --install --prefix DIR` or moved later still describes itself.
file(RELATIVE_PATH RECCL_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" RECCL_PC_TO_PREFIX "${RECCL_PC_TO_PREFIX}")
configure_file(cmake/reccl.pc.in ${CMAKE_BINARY_DIR}/reccl.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/reccl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)

install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc FILES_MATCHING PATTERN "*.md")
install(DIRECTORY examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT doc)
