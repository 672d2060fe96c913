# What `cmake --install` puts in place, under CMAKE_INSTALL_PREFIX (and
# DESTDIR): the ferry command, its man page, and the bash and zsh
# completions (src/cli/completion.*); and the Debian package that
# `cpack -G DEB` builds from the same rules, with its dependencies found
# by dpkg-shlibdeps (package dpkg-dev). Nothing of the tests or the bench
# is installed.
include(GNUInstallDirs)

install(TARGETS ferry RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/man/ferry.1
        DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
# bash-completion loads completions/NAME on first use of NAME
install(FILES ${PROJECT_SOURCE_DIR}/src/cli/completion.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME ferry)
# zsh: Debian's zsh searches share/zsh/vendor-completions under /usr and
# share/zsh/site-functions under /usr/local (its fpath). Decided when
# installing, from the prefix then in force: --prefix, or cpack's /usr.
set(FERRY_ZSH_COMPLETION_DIR "" CACHE STRING
    "Where _ferry goes (empty: by the prefix, as Debian's zsh searches)")
set(FERRY_ZSH_SRC ${PROJECT_SOURCE_DIR}/src/cli/completion.zsh)
install(CODE "
  set(dir \"${FERRY_ZSH_COMPLETION_DIR}\")
  if(NOT dir AND CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
    set(dir \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions\")
  elseif(NOT dir)
    set(dir \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/zsh/site-functions\")
  elseif(NOT IS_ABSOLUTE \"\${dir}\")
    set(dir \"\${CMAKE_INSTALL_PREFIX}/\${dir}\")
  endif()
  file(INSTALL DESTINATION \"\${dir}\" TYPE FILE RENAME _ferry
       FILES \"${FERRY_ZSH_SRC}\")")

if(FERRY_TESTING)
  message(STATUS "FERRY_TESTING is on: this build honours FERRY_FAULT and "
                 "FERRY_CRASH; do not install or package it")
endif()

# cpack -G DEB: a package for /usr, its Depends from the libraries the
# binary links (libsqlite3-0, libxxhash0, libc6). Package a plain build:
# a FERRY_TESTING one honours the fault-injection variables.
set(CPACK_PACKAGE_NAME ferry)
set(CPACK_PACKAGE_VENDOR "ferry")
set(CPACK_PACKAGE_CONTACT "ferry maintainers <ferry@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "copy huge directory trees with parallel workers, resumably")
set(CPACK_PACKAGE_DESCRIPTION
    "ferry copies huge trees from slow sources with many files in flight and
keeps a journal of every file in an SQLite manifest, so a copy resumes after
a crash, a re-run copies only what changed, and a copy can be verified
against the recorded XXH3-128 hashes.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# what dpkg-shlibdeps finds, and the SQLite the manifest's SQL needs
# (cmake/Dependencies.cmake), which it cannot see in the symbols
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libsqlite3-0 (>= 3.35)")
# libpq is loaded only for a shared (PostgreSQL) manifest (src/manifest_pg/pq.h):
# dpkg-shlibdeps cannot see it, and most runs do not need it
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libpq5 (>= 12)")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "xxhash, bash-completion")
set(CPACK_STRIP_FILES ON)
include(CPack)
