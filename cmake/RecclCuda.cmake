# The CUDA path (docs/cuda.md). RECCL_CUDA=auto builds it where nvcc is found (every machine of
# this kind, CI's too, has the toolkit at /usr/local/cuda), on requires it, off never builds it.
# Sets RECCL_HAVE_CUDA. The CUDA runtime is linked statically, so what is built here runs on a
# GPU machine that has only the driver.
set(RECCL_CUDA auto CACHE STRING "Build the CUDA path: auto (where nvcc is found), on, off")
set_property(CACHE RECCL_CUDA PROPERTY STRINGS auto on off)
string(TOLOWER "${RECCL_CUDA}" reccl_cuda_mode)
if(NOT reccl_cuda_mode MATCHES "^(auto|on|off)$")
  message(FATAL_ERROR "RECCL_CUDA=${RECCL_CUDA}: expected auto, on or off")
endif()

set(RECCL_HAVE_CUDA OFF)
if(NOT reccl_cuda_mode STREQUAL "off")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(RECCL_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH PATH_SUFFIXES bin PATHS /usr/local/cuda/bin)
    if(RECCL_NVCC)
      set(ENV{CUDACXX} ${RECCL_NVCC})
    endif()
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Hopper (H100/H200) machine code plus its PTX, which newer GPUs compile at load. One target
    # keeps the build short; -DCMAKE_CUDA_ARCHITECTURES=... adds others.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    if(NOT DEFINED CMAKE_CUDA_HOST_COMPILER)
      set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER})
    endif()
    if(CMAKE_CXX_COMPILER_LAUNCHER AND NOT DEFINED CMAKE_CUDA_COMPILER_LAUNCHER)
      set(CMAKE_CUDA_COMPILER_LAUNCHER ${CMAKE_CXX_COMPILER_LAUNCHER})
    endif()
    # Targets link CUDA::cudart_static themselves (by full path): CMake's own runtime choice would
    # name it by -l without its directory on targets linked as C++ (libreccl.so).
    set(CMAKE_CUDA_RUNTIME_LIBRARY None)
    enable_language(CUDA)
    # C++20 as the rest. CMake before 3.26 knows no CUDA20 flag for nvcc: tell it.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    # System include directories reach CUDA sources through imported targets (-isystem
    # /usr/include), which breaks the C++ library's #include_next under nvcc: treat them as the
    # compiler's own, as CMake does for C++.
    list(APPEND CMAKE_CUDA_IMPLICIT_INCLUDE_DIRECTORIES ${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES})
    set(RECCL_HAVE_CUDA ON)
    message(STATUS "reccl: CUDA path on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(reccl_cuda_mode STREQUAL "on")
    message(FATAL_ERROR "RECCL_CUDA=on but no working nvcc was found (set CUDACXX or CUDA_HOME)")
  else()
    message(STATUS "reccl: CUDA path off (no nvcc found; RECCL_CUDA=auto)")
  endif()
endif()

# Warnings for CUDA sources (nvcc passes the host compiler's through -Xcompiler), on top of
# reccl_warnings() for the C++ sources of the same target.
function(reccl_cuda_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-Werror=return-type>)
endfunction()
