# `tiepoint batch` (issue 17), through the binary. Included from tests/CMakeLists.txt.
# batch_test: validation errors, matrix expansion, resume after SIGKILL, a failing job, changed
# options, shards in parallel, SIGTERM, the printed Slurm script (about 30-60 s on 2 cores).
tiepoint_add_test(batch_test cli/batch_test.cc LIBS nlohmann_json::nlohmann_json)
add_dependencies(batch_test tiepoint)
target_compile_definitions(batch_test PRIVATE
  TIEPOINT_BINARY="$<TARGET_FILE:tiepoint>"
  TIEPOINT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")

# A real one-node Slurm cluster (scripts/slurm-local.sh; installs slurm-wlm and munge when
# missing, as root): the shared BAL files x 2 solvers in 3 shards, compared with a local run.
# Exit 77 = skipped (no shared data, not root, or the daemons cannot run here: it says why).
add_test(NAME cli.batch_slurm
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/batch_slurm.sh $<TARGET_FILE:tiepoint>
                 ${CMAKE_CURRENT_BINARY_DIR}/batch_slurm ${TIEPOINT_DEFAULT_SHARED_DATA})
set_tests_properties(cli.batch_slurm PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 RUN_SERIAL TRUE)
