# The release package: `cpack -G DEB` in a build folder makes conveyor_<version>_<arch>.deb with what
# `cmake --install` installs (the library, its headers and CMake package, the `conveyor` program, and the
# LICENSE, README.md and CHANGELOG.md under share/doc/conveyor), installed under /usr. Depends lists the Debian
# packages of what the program and the CMake package load (tests/package/check.sh checks the program's against
# ldd); the CUDA toolkit's libraries (cuBLAS, cuSPARSE, CUPTI, NCCL) come from the toolkit, found through the
# program's RUNPATH (the toolkit's library folder at build time) or LD_LIBRARY_PATH.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME conveyor)
set(CPACK_PACKAGE_VENDOR "The Conveyor developers")
set(CPACK_PACKAGE_CONTACT "The Conveyor developers <conveyor-dev@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "CUDA Graph toolkit: define GPU work once, instantiate it, replay it")
set(CPACK_PACKAGE_DESCRIPTION "A C++20 library and command-line tool for CUDA Graphs: define (builder, capture), \
execute (instantiate, update), observe (DOT/JSON, profile, doctor), keep (graph files) and the graphed assembly \
line. Needs the CUDA toolkit ${CUDAToolkit_VERSION_MAJOR}.x (not a Debian package) in /usr/local/cuda.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_DEPENDS
  "libc6, libstdc++6, libgcc-s1, libfmt9, libpng16-16, zlib1g, libzstd1, libzstd-dev, libbenchmark1debian, libopenmpi3")
set(CPACK_STRIP_FILES bin/conveyor)
include(CPack)
