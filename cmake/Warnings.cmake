# Picky warnings for our own targets (curl's PickyWarnings, git's config.mak.dev).
set(FERRY_WARNINGS
  -Wall -Wextra -Wpedantic -Wshadow -Wformat=2 -Wstrict-prototypes
  -Wmissing-prototypes -Wold-style-definition -Wpointer-arith -Wcast-align
  -Wwrite-strings -Wundef -Wvla -Wnull-dereference -Wdouble-promotion
  -Wno-unused-parameter)
if(FERRY_WERROR)
  list(APPEND FERRY_WARNINGS -Werror)
endif()

function(ferry_target_warnings target)
  target_compile_options(${target} PRIVATE ${FERRY_WARNINGS})
endfunction()
