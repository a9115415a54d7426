# reccl_bpf_object(NAME SOURCE)
#
# Compiles SOURCE (a *.bpf.c program) with clang -target bpf against a vmlinux.h generated from
# the build host's BTF, and generates a libbpf skeleton with `bpftool gen skeleton`. Produces an
# INTERFACE target `bpf_<NAME>` whose include directory holds `<NAME>.skel.h`.
#
# vmlinux.h is generated at build time rather than pinned: CO-RE relocations make the object load
# on any BTF kernel, so only the build host needs BTF, and the repository stays free of a 3 MB
# generated header that would go stale with each kernel.

find_program(BPF_CLANG NAMES clang clang-16 clang-15 clang-14 REQUIRED)
find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)
set(RECCL_VMLINUX_BTF "/sys/kernel/btf/vmlinux" CACHE FILEPATH "BTF used to generate vmlinux.h")

set(RECCL_BPF_GEN_DIR ${CMAKE_BINARY_DIR}/bpf-gen)
set(RECCL_VMLINUX_H ${RECCL_BPF_GEN_DIR}/vmlinux/vmlinux.h)
if(NOT EXISTS ${RECCL_VMLINUX_BTF})
  message(FATAL_ERROR "no kernel BTF at ${RECCL_VMLINUX_BTF}: reccl's BPF programs are built "
                      "against it (set RECCL_VMLINUX_BTF to a vmlinux with BTF)")
endif()
add_custom_command(
  OUTPUT ${RECCL_VMLINUX_H}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RECCL_BPF_GEN_DIR}/vmlinux
  COMMAND ${BPFTOOL} btf dump file ${RECCL_VMLINUX_BTF} format c > ${RECCL_VMLINUX_H}.tmp
  COMMAND ${CMAKE_COMMAND} -E rename ${RECCL_VMLINUX_H}.tmp ${RECCL_VMLINUX_H}
  COMMENT "generating vmlinux.h from ${RECCL_VMLINUX_BTF}"
  VERBATIM)
add_custom_target(reccl_vmlinux_h DEPENDS ${RECCL_VMLINUX_H})

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  set(RECCL_BPF_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(RECCL_BPF_ARCH arm64)
else()
  set(RECCL_BPF_ARCH ${CMAKE_SYSTEM_PROCESSOR})
endif()

function(reccl_bpf_object name source)
  get_filename_component(src ${source} ABSOLUTE)
  set(obj ${RECCL_BPF_GEN_DIR}/${name}.bpf.o)
  set(skel ${RECCL_BPF_GEN_DIR}/skel/${name}.skel.h)
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${BPF_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_${RECCL_BPF_ARCH}
            -I${RECCL_BPF_GEN_DIR}/vmlinux -I${PROJECT_SOURCE_DIR}/bpf/include
            -Wall -Wno-unused-function -Werror
            -c ${src} -o ${obj}
    DEPENDS ${src} ${RECCL_VMLINUX_H} ${ARGN}
    IMPLICIT_DEPENDS C ${src}
    COMMENT "bpf ${name}.bpf.c"
    VERBATIM)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${RECCL_BPF_GEN_DIR}/skel
    COMMAND ${BPFTOOL} gen skeleton ${obj} name ${name} > ${skel}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${skel}.tmp ${skel}
    DEPENDS ${obj}
    COMMENT "skeleton ${name}.skel.h"
    VERBATIM)
  add_custom_target(bpf_${name}_gen DEPENDS ${skel})
  add_library(bpf_${name} INTERFACE)
  add_dependencies(bpf_${name} bpf_${name}_gen)
  target_include_directories(bpf_${name} INTERFACE ${RECCL_BPF_GEN_DIR}/skel ${PROJECT_SOURCE_DIR}/bpf/include)
  target_link_libraries(bpf_${name} INTERFACE PkgConfig::LIBBPF)
endfunction()
