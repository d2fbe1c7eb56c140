# Install, export and package config of the header-only INTERFACE target (included by the
# top-level CMakeLists.txt when MQALOGITS_INSTALL is ON):
#   <prefix>/include/mqalogits/...                          the headers
#   <prefix>/share/cmake/mqalogits/mqalogits{Config,ConfigVersion,Targets}.cmake
#   <prefix>/share/pkgconfig/mqalogits.pc
# Everything lands under share/: the package is architecture independent (ARCH_INDEPENDENT
# version file), so one install serves 32- and 64-bit consumers alike.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MQALOGITS_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/cmake/mqalogits"
    CACHE STRING "Where mqalogits' CMake package files are installed (relative to the prefix)")
set(MQALOGITS_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_DATADIR}/pkgconfig"
    CACHE STRING "Where mqalogits.pc is installed (relative to the prefix)")
mark_as_advanced(MQALOGITS_INSTALL_CMAKEDIR MQALOGITS_INSTALL_PKGCONFIGDIR)

# The headers and the table of host paths they read (backend/host/isa/paths.def).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mqalogits
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.def")
install(TARGETS mqalogits EXPORT mqalogitsTargets)
install(EXPORT mqalogitsTargets
        NAMESPACE mqalogits::
        DESTINATION ${MQALOGITS_INSTALL_CMAKEDIR})

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/mqalogitsConfig.cmake.in
  ${PROJECT_BINARY_DIR}/mqalogitsConfig.cmake
  INSTALL_DESTINATION ${MQALOGITS_INSTALL_CMAKEDIR})
# 0.x: a minor version may break the API, so only the same minor version is compatible.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/mqalogitsConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion
  ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/mqalogitsConfig.cmake
              ${PROJECT_BINARY_DIR}/mqalogitsConfigVersion.cmake
        DESTINATION ${MQALOGITS_INSTALL_CMAKEDIR})

# pkg-config: absolute, normalised paths under the prefix the tree is installed to (the prefix
# of `cmake --install --prefix`, known only at install time: the .pc is finished then). A tree
# moved after installing is found with `pkg-config --define-prefix`.
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(MQALOGITS_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(MQALOGITS_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(MQALOGITS_PC_PREFIX "%MQALOGITS_INSTALL_PREFIX%")
string(TOUPPER "${MQALOGITS_BACKEND}" _mqalogits_pc_backend)
set(MQALOGITS_PC_DEFINES "-DMQALOGITS_BACKEND_${_mqalogits_pc_backend}=1")
if(MQALOGITS_BACKEND STREQUAL "neuron" AND DEFINED MQALOGITS_NEURON_GEN)
  string(TOUPPER "${MQALOGITS_NEURON_GEN}" _mqalogits_pc_gen)
  string(APPEND MQALOGITS_PC_DEFINES " -DMQALOGITS_NEURON_GEN_${_mqalogits_pc_gen}=1")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/mqalogits.pc.in ${PROJECT_BINARY_DIR}/mqalogits.pc @ONLY)
install(CODE "
  file(READ \"${PROJECT_BINARY_DIR}/mqalogits.pc\" _mqalogits_pc)
  string(REPLACE \"%MQALOGITS_INSTALL_PREFIX%\" \"\${CMAKE_INSTALL_PREFIX}\" _mqalogits_pc \"\${_mqalogits_pc}\")
  file(WRITE \"${PROJECT_BINARY_DIR}/mqalogits.pc.install\" \"\${_mqalogits_pc}\")")
install(FILES ${PROJECT_BINARY_DIR}/mqalogits.pc.install DESTINATION ${MQALOGITS_INSTALL_PKGCONFIGDIR}
        RENAME mqalogits.pc)
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/mqalogits
        OPTIONAL)

# The torch op library, where examples/12_torch_ops builds it (it calls this):
#   <prefix>/lib/libmqalogits_torch_ops.so   exported as mqalogits::torch_ops
# A C++ engine links it (beside Torch) and finds the ops through torch's dispatcher. Its ops
# register when it is loaded: the target keeps a linker that drops unreferenced libraries
# (--as-needed) from dropping it. Not under pip: the wheel has its copy in the Python package.
function(mqalogits_install_torch_ops target)
  if(SKBUILD)
    return()
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME torch_ops)
  set_property(TARGET ${target} APPEND PROPERTY INTERFACE_LINK_OPTIONS "LINKER:--no-as-needed")
  install(TARGETS ${target} EXPORT mqalogitsTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()
