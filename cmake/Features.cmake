# Feature checks produce HAVE_* macros in config.h rather than OS tests.
include(CheckSymbolExists)
include(CheckFunctionExists)
set(CMAKE_REQUIRED_DEFINITIONS -D_GNU_SOURCE)
check_symbol_exists(statx "sys/stat.h" HAVE_STATX)
check_symbol_exists(syncfs "unistd.h" HAVE_SYNCFS)
check_symbol_exists(copy_file_range "unistd.h" HAVE_COPY_FILE_RANGE)
check_symbol_exists(SEEK_DATA "unistd.h" HAVE_SEEK_DATA)
check_symbol_exists(O_NOATIME "fcntl.h" HAVE_O_NOATIME)
check_symbol_exists(posix_fadvise "fcntl.h" HAVE_POSIX_FADVISE)
unset(CMAKE_REQUIRED_DEFINITIONS)
configure_file(${CMAKE_CURRENT_LIST_DIR}/config.h.in
               ${PROJECT_BINARY_DIR}/generated/config.h)
