# Writes the build-info header (io/base/build_info.h.in) with the commit checked out at
# build time, "-dirty" when tracked files differ from it. Run by the tiepoint_build_info
# target at every build; configure_file rewrites the header only when its text changes,
# so only a new commit recompiles what includes it.
#   cmake -DSOURCE_DIR=... -DIN=... -DOUT=... -DPROJECT_VERSION=... -DTIEPOINT_BUILD_FLAGS=...
#         -P cmake/build_info.cmake
execute_process(COMMAND git rev-parse --short=12 HEAD
                WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE TIEPOINT_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rev_failed ERROR_QUIET)
if(rev_failed OR NOT TIEPOINT_GIT_COMMIT)
  set(TIEPOINT_GIT_COMMIT unknown)
else()
  execute_process(COMMAND git diff --quiet HEAD --
                  WORKING_DIRECTORY ${SOURCE_DIR}
                  RESULT_VARIABLE dirty ERROR_QUIET)
  if(dirty)
    string(APPEND TIEPOINT_GIT_COMMIT "-dirty")
  endif()
endif()
configure_file(${IN} ${OUT} @ONLY)
