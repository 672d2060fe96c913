# SQLite, xxHash and libpq come from Debian's packages; say which one is missing.
find_package(PkgConfig)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR "pkg-config not found: apt-get install pkg-config")
endif()
find_package(Threads REQUIRED)

pkg_check_modules(SQLITE3 IMPORTED_TARGET sqlite3>=3.35)
if(NOT SQLITE3_FOUND)
  message(FATAL_ERROR "SQLite 3.35+ not found: apt-get install libsqlite3-dev")
endif()

pkg_check_modules(XXHASH IMPORTED_TARGET libxxhash>=0.8)
if(NOT XXHASH_FOUND)
  message(FATAL_ERROR "xxHash 0.8+ not found: apt-get install libxxhash-dev")
endif()

# The shared manifest (src/manifest_pg/, issue 14): PostgreSQL's client
# library.
pkg_check_modules(LIBPQ IMPORTED_TARGET libpq>=12)
if(NOT LIBPQ_FOUND)
  message(FATAL_ERROR "libpq 12+ not found: apt-get install libpq-dev")
endif()
