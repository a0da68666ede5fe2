# The command line under faults (issue 19): output disk full (RLIMIT_FSIZE), SIGKILL while
# writing, SIGINT/SIGTERM, inputs cut or changed while read, outputs that are directories,
# dangling links, read-only or the input itself, memory exhausted (RLIMIT_AS). Each case is
# tests/cli/faults.sh CASE; each takes seconds. Exit 77 = skipped (e.g. RLIMIT_AS on ASan).
set(_faults ${CMAKE_CURRENT_SOURCE_DIR}/cli/faults.sh)
set(_faults_out ${CMAKE_CURRENT_BINARY_DIR}/cli_faults_out)
foreach(_case fsize-ba fsize-synth fsize-extract fsize-match fsize-track kill sigint sigterm
              input-cut input-swapped in-dir out-dir out-dangling-link out-readonly out-same-as-input
              memory memory-blas)
  add_test(NAME cli.faults.${_case}
           COMMAND ${_faults} $<TARGET_FILE:tiepoint> ${_case} ${_faults_out}/${_case}
                   ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.faults.${_case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
                       LABELS faults)
endforeach()

# `tiepoint reconstruct` and `tiepoint batch` under the same faults (tests/cli/faults_sfm.sh
# CASE), on a small scene tiepoint renders: each case takes seconds to about 25 s.
set(_faults_sfm ${CMAKE_CURRENT_SOURCE_DIR}/cli/faults_sfm.sh)
foreach(_case rec-fsize rec-kill rec-sigint rec-sigterm rec-input-cut rec-input-swapped
              rec-input-removed rec-out-file rec-out-dangling-link rec-out-readonly rec-memory
              batch-fsize batch-kill batch-sigint batch-sigterm batch-input-removed batch-out-file
              batch-out-dangling-link batch-out-readonly batch-memory)
  add_test(NAME cli.faults.${_case}
           COMMAND ${_faults_sfm} $<TARGET_FILE:tiepoint> ${_case} ${_faults_out}/${_case}
                   ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.faults.${_case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
                       LABELS faults)
endforeach()
