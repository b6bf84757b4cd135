# Third-party dependencies, found as packages where their CMake configs exist (Debian) and as
# plain headers where only headers are installed (the GPU machine's image).
find_package(Threads REQUIRED)
find_package(Python 3.10 REQUIRED COMPONENTS Interpreter Development.Module)

# nlohmann/json
find_package(nlohmann_json 3.10 CONFIG QUIET)
add_library(kbv::json INTERFACE IMPORTED)
if(nlohmann_json_FOUND)
  target_link_libraries(kbv::json INTERFACE nlohmann_json::nlohmann_json)
else()
  find_path(KBV_JSON_INCLUDE nlohmann/json.hpp REQUIRED)
  target_include_directories(kbv::json INTERFACE ${KBV_JSON_INCLUDE})
endif()

# CLI11
find_package(CLI11 CONFIG QUIET)
add_library(kbv::cli11 INTERFACE IMPORTED)
if(CLI11_FOUND)
  target_link_libraries(kbv::cli11 INTERFACE CLI11::CLI11)
else()
  find_path(KBV_CLI11_INCLUDE CLI/CLI.hpp REQUIRED)
  target_include_directories(kbv::cli11 INTERFACE ${KBV_CLI11_INCLUDE})
endif()

# fmt (compiled library when present, header-only otherwise)
find_package(fmt CONFIG QUIET)
add_library(kbv::fmt INTERFACE IMPORTED)
if(fmt_FOUND)
  target_link_libraries(kbv::fmt INTERFACE fmt::fmt)
else()
  find_path(KBV_FMT_INCLUDE fmt/format.h REQUIRED)
  target_include_directories(kbv::fmt INTERFACE ${KBV_FMT_INCLUDE})
  target_compile_definitions(kbv::fmt INTERFACE FMT_HEADER_ONLY=1)
endif()

# OpenSSL (SHA-256 content keys) and SQLite (the result store)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(SQLite3 QUIET)
add_library(kbv::sqlite INTERFACE IMPORTED)
if(SQLite3_FOUND)
  target_link_libraries(kbv::sqlite INTERFACE SQLite::SQLite3)
else()
  # Machines with only the runtime library: the header is brought at build time (never committed,
  # see docs/results), and the versioned library is linked directly.
  find_path(KBV_SQLITE_INCLUDE sqlite3.h PATHS ${CMAKE_SOURCE_DIR}/.deps/include REQUIRED)
  find_library(KBV_SQLITE_LIBRARY NAMES sqlite3 libsqlite3.so.0 REQUIRED)
  target_include_directories(kbv::sqlite INTERFACE ${KBV_SQLITE_INCLUDE})
  target_link_libraries(kbv::sqlite INTERFACE ${KBV_SQLITE_LIBRARY})
endif()

# CUDA for kbv_native's timing path
set(KBV_HAVE_CUDA OFF)
if(NOT KBV_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Hopper (H100/H200) natively, plus PTX so newer GPUs can JIT it.
      set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(KBV_HAVE_CUDA ON)
  elseif(KBV_CUDA STREQUAL "ON")
    message(FATAL_ERROR "KBV_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "kbv: CUDA timing path ${KBV_HAVE_CUDA}")
