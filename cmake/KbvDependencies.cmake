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
  find_path(KBV_JSON_INCLUDE nlohmann/json.hpp PATHS ${CMAKE_SOURCE_DIR}/.deps/include REQUIRED)
  target_include_directories(kbv::json INTERFACE ${KBV_JSON_INCLUDE})
endif()

# CLI11
find_package(CLI11 CONFIG QUIET)
add_library(kbv::cli11 INTERFACE IMPORTED)
if(CLI11_FOUND)
  target_link_libraries(kbv::cli11 INTERFACE CLI11::CLI11)
else()
  find_path(KBV_CLI11_INCLUDE CLI/CLI.hpp PATHS ${CMAKE_SOURCE_DIR}/.deps/include REQUIRED)
  target_include_directories(kbv::cli11 INTERFACE ${KBV_CLI11_INCLUDE})
endif()

# fmt (compiled library when present, header-only otherwise)
find_package(fmt CONFIG QUIET)
add_library(kbv::fmt INTERFACE IMPORTED)
if(fmt_FOUND)
  target_link_libraries(kbv::fmt INTERFACE fmt::fmt)
else()
  find_path(KBV_FMT_INCLUDE fmt/format.h PATHS ${CMAKE_SOURCE_DIR}/.deps/include REQUIRED)
  target_include_directories(kbv::fmt INTERFACE ${KBV_FMT_INCLUDE})
  target_compile_definitions(kbv::fmt INTERFACE FMT_HEADER_ONLY=1)
endif()

# OpenSSL (SHA-256 content keys) and SQLite (the result store)
find_package(OpenSSL QUIET COMPONENTS Crypto)
if(NOT OpenSSL_FOUND)
  # Runtime library only (the GPU machine's image): headers staged by scripts/stage_deps.sh.
  find_path(KBV_OPENSSL_INCLUDE openssl/evp.h PATHS ${CMAKE_SOURCE_DIR}/.deps/include REQUIRED)
  find_library(KBV_CRYPTO_LIBRARY NAMES crypto libcrypto.so.3 REQUIRED)
  add_library(OpenSSL::Crypto INTERFACE IMPORTED)
  target_include_directories(OpenSSL::Crypto INTERFACE ${KBV_OPENSSL_INCLUDE})
  target_link_libraries(OpenSSL::Crypto INTERFACE ${KBV_CRYPTO_LIBRARY})
endif()
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

# libcurl (kbv generate's HTTP): Debian's libcurl4-openssl-dev, or on a machine with only the
# runtime library, the headers staged by scripts/stage_deps.sh and the versioned library.
# Without either, kbv builds without it (generate/http_unavailable.cpp says so when asked).
option(KBV_WITH_GENERATE_HTTP "build kbv generate's HTTP when libcurl is found" ON)
if(KBV_WITH_GENERATE_HTTP)
  find_package(CURL QUIET)
endif()
add_library(kbv::curl INTERFACE IMPORTED)
set(KBV_HAVE_CURL ON)
if(NOT KBV_WITH_GENERATE_HTTP)
  set(KBV_HAVE_CURL OFF)
elseif(CURL_FOUND)
  target_link_libraries(kbv::curl INTERFACE CURL::libcurl)
else()
  find_path(KBV_CURL_INCLUDE curl/curl.h PATHS ${CMAKE_SOURCE_DIR}/.deps/include)
  find_library(KBV_CURL_LIBRARY NAMES curl libcurl.so.4)
  if(KBV_CURL_INCLUDE AND KBV_CURL_LIBRARY)
    target_include_directories(kbv::curl INTERFACE ${KBV_CURL_INCLUDE})
    target_link_libraries(kbv::curl INTERFACE ${KBV_CURL_LIBRARY})
  else()
    set(KBV_HAVE_CURL OFF)
  endif()
endif()
message(STATUS "kbv: kbv generate's HTTP (libcurl) ${KBV_HAVE_CURL}")

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

# cpp-httplib (kbv serve). Debian's libcpp-httplib-dev is a compiled library with a pkg-config
# file and no CMake config; elsewhere upstream's single header (header-only) may be staged in
# .deps/include. Without either, kbv builds without the service (serve/server_unavailable.cpp
# says so when `kbv serve` is run): a machine where nothing can be installed still gets kbv.
option(KBV_WITH_SERVE "build kbv serve when cpp-httplib is found" ON)
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND AND KBV_WITH_SERVE)
  pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
endif()
add_library(kbv::httplib INTERFACE IMPORTED)
set(KBV_HAVE_HTTPLIB ON)
if(NOT KBV_WITH_SERVE)
  set(KBV_HAVE_HTTPLIB OFF)
elseif(HTTPLIB_FOUND)
  target_link_libraries(kbv::httplib INTERFACE PkgConfig::HTTPLIB)
else()
  find_path(KBV_HTTPLIB_INCLUDE httplib.h PATHS ${CMAKE_SOURCE_DIR}/.deps/include)
  # Staged by scripts/stage_deps.sh: Debian's compiled library beside its header, found through
  # the rpath at run time. Without it a staged header is upstream's header-only one.
  find_library(KBV_HTTPLIB_LIBRARY NAMES cpp-httplib PATHS ${CMAKE_SOURCE_DIR}/.deps/lib
               NO_DEFAULT_PATH)
  if(KBV_HTTPLIB_INCLUDE)
    target_include_directories(kbv::httplib INTERFACE ${KBV_HTTPLIB_INCLUDE})
    if(KBV_HTTPLIB_LIBRARY)
      target_link_libraries(kbv::httplib INTERFACE ${KBV_HTTPLIB_LIBRARY})
      get_filename_component(KBV_HTTPLIB_DIR ${KBV_HTTPLIB_LIBRARY} DIRECTORY)
      list(APPEND CMAKE_BUILD_RPATH ${KBV_HTTPLIB_DIR})
      # DT_RPATH rather than DT_RUNPATH: the library's own needs (brotli, staged beside it) are
      # looked up along the executable's path too, which a RUNPATH does not do.
      target_link_options(kbv::httplib INTERFACE -Wl,--disable-new-dtags)
    endif()
  else()
    set(KBV_HAVE_HTTPLIB OFF)
  endif()
endif()
message(STATUS "kbv: kbv serve (cpp-httplib) ${KBV_HAVE_HTTPLIB}")
