# Command-line behaviour: exit codes, messages naming the file and line, no partial output.
set(_tp $<TARGET_FILE:tiepoint>)
set(_expect ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect.sh)
set(_out ${CMAKE_CURRENT_BINARY_DIR}/cli_out)
file(MAKE_DIRECTORY ${_out})

file(GLOB _malformed ${CMAKE_CURRENT_SOURCE_DIR}/data/malformed/*.txt
                     ${CMAKE_CURRENT_SOURCE_DIR}/data/malformed/*.bz2)
foreach(_file ${_malformed})
  get_filename_component(_name ${_file} NAME)
  add_test(NAME cli.malformed.${_name}
           COMMAND ${_expect} 2 "${_name}" ${_out}/${_name}.out.bal ${_out}/${_name}.json --
                   ${_tp} ba ${_file} --output ${_out}/${_name}.out.bal --report ${_out}/${_name}.json)
endforeach()

add_test(NAME cli.unreadable_path
         COMMAND ${_expect} 2 "does-not-exist.txt" ${_out}/x.bal -- ${_tp} ba ${_out}/does-not-exist.txt --output ${_out}/x.bal)
add_test(NAME cli.bad_solver
         COMMAND ${_expect} 2 "--solver 'magic'" -- ${_tp} ba ${CMAKE_CURRENT_SOURCE_DIR}/../data/sample-20-2000.bal --solver magic)
add_test(NAME cli.bad_loss
         COMMAND ${_expect} 2 "scale" -- ${_tp} ba ${CMAKE_CURRENT_SOURCE_DIR}/../data/sample-20-2000.bal --loss huber)
add_test(NAME cli.fixed_camera_out_of_range
         COMMAND ${_expect} 2 "fixed camera index 999" ${_out}/fix.bal -- ${_tp} ba ${CMAKE_CURRENT_SOURCE_DIR}/../data/sample-20-2000.bal --fix-cameras 999 --output ${_out}/fix.bal)
add_test(NAME cli.unwritable_output
         COMMAND ${_expect} 2 "/nonexistent-dir/out.bal" -- ${_tp} ba ${CMAKE_CURRENT_SOURCE_DIR}/../data/sample-20-2000.bal --max-iterations 1 --output /nonexistent-dir/out.bal)
# Every output's directory is checked before the work: a bad --ply leaves no --output behind.
add_test(NAME cli.unwritable_ply_writes_nothing
         COMMAND ${_expect} 2 "--ply /nonexistent-dir/out.ply" ${_out}/ply-first.bal -- ${_tp} ba ${CMAKE_CURRENT_SOURCE_DIR}/../data/sample-20-2000.bal --max-iterations 1 --output ${_out}/ply-first.bal --ply /nonexistent-dir/out.ply)
add_test(NAME cli.synth_unwritable_truth_writes_nothing
         COMMAND ${_expect} 2 "--truth /nonexistent-dir/truth.bal" ${_out}/truth-first.bal -- ${_tp} synth --cameras 5 --points 20 -o ${_out}/truth-first.bal --truth /nonexistent-dir/truth.bal)
add_test(NAME cli.ba_short_output_option
         COMMAND ${_tp} ba ${CMAKE_CURRENT_SOURCE_DIR}/../data/sample-20-2000.bal --max-iterations 1 -o ${_out}/short-option.bal)
add_test(NAME cli.synth_bad_options
         COMMAND ${_expect} 2 "observations_per_point" ${_out}/bad.bal -- ${_tp} synth --cameras 3 --observations-per-point 9 -o ${_out}/bad.bal)
add_test(NAME cli.help COMMAND ${_tp} ba --help)
add_test(NAME cli.version COMMAND ${_tp} version)
add_test(NAME cli.roundtrip COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/roundtrip.sh ${_tp} ${_out}/roundtrip)
add_test(NAME cli.bench_unknown_solver
         COMMAND ${_expect} 2 "magic" ${_out}/bench.json -- ${_tp} bench ${CMAKE_CURRENT_SOURCE_DIR}/../data/sample-20-2000.bal --solvers cholmod,magic --out ${_out}/bench.json)
add_test(NAME cli.bench_missing_problem
         COMMAND ${_expect} 2 "no-such-problem.bal" ${_out}/bench2.json -- ${_tp} bench ${_out}/no-such-problem.bal --solvers cholmod --out ${_out}/bench2.json)
# Through the hidden bench-worker command (each solve a fresh process), repeated.
add_test(NAME cli.bench_repetitions
         COMMAND ${_tp} bench ${CMAKE_CURRENT_SOURCE_DIR}/../data/sample-20-2000.bal --solvers pcg-schur,cholmod --repetitions 3 --max-iterations 5)
set_tests_properties(cli.bench_repetitions PROPERTIES
                     PASS_REGULAR_EXPRESSION "median of 3 solves each.*sample-20-2000 +pcg-schur +5 .*sample-20-2000 +cholmod +[0-9]+ "
                     FAIL_REGULAR_EXPRESSION "error|failed")
add_test(NAME cli.bench_worker_without_pipe
         COMMAND ${_expect} 2 "--fd 99 is not an open file descriptor" -- ${_tp} bench-worker --fd 99 --solver cholmod ${CMAKE_CURRENT_SOURCE_DIR}/../data/sample-20-2000.bal)
add_test(NAME cli.bench_malformed_problem
         COMMAND ${_expect} 1 "1 of 1 runs failed" -- ${_tp} bench ${CMAKE_CURRENT_SOURCE_DIR}/data/malformed/truncated_points.txt --solvers cholmod)
add_test(NAME cli.device_cuda
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/device_cuda.sh ${_tp} ${CMAKE_CURRENT_SOURCE_DIR}/../data/sample-20-2000.bal)
