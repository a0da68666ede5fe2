# `tiepoint match` (issue 7): outputs, pairs, verification, CUDA/CPU; bad or mismatched
# inputs exit 2 with a message naming the file and leave no output.
set(_tp $<TARGET_FILE:tiepoint>)
set(_expect ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect.sh)
set(_mout ${CMAKE_CURRENT_BINARY_DIR}/cli_match_out)
set(_good ${CMAKE_CURRENT_SOURCE_DIR}/data/images/blobs.pgm)
file(MAKE_DIRECTORY ${_mout}/in)
# Inputs made at configure time: a truncated feature file, a text file posing as one, a pair
# list naming an unknown file, an intrinsics table without the images.
file(WRITE ${_mout}/in/truncated.tpfeat "TPFEAT01abcd")
file(WRITE ${_mout}/in/notfeatures.tpfeat "hello, I am not a feature file\n")
file(WRITE ${_mout}/in/pairs_unknown.txt "good1 nosuch\n")
file(WRITE ${_mout}/in/intrinsics_other.txt "other.png 800 800 320 240\n")

add_test(NAME cli.match.end_to_end
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/match.sh ${_tp} ${_good} ${_mout}/e2e)
# Fixture: two good feature files for the error cases below (and two with names of 130
# bytes, whose pair's output name would be longer than a file name may be, and four whose
# pairs 'a--b', 'c' and 'a', 'b--c' would write one output).
string(REPEAT "a" 130 _long_a)
string(REPEAT "b" 130 _long_b)
add_test(NAME cli.match.setup
         COMMAND sh -c "${_tp} extract ${_good} -o ${_mout}/x --quiet >/dev/null && cp ${_mout}/x/blobs.pgm.tpfeat ${_mout}/in/good1.tpfeat && cp ${_mout}/x/blobs.pgm.tpfeat ${_mout}/in/good2.tpfeat && mkdir -p ${_mout}/in/sub && cp ${_mout}/x/blobs.pgm.tpfeat ${_mout}/in/sub/good1.tpfeat && cp ${_mout}/x/blobs.pgm.tpfeat ${_mout}/in/${_long_a}.tpfeat && cp ${_mout}/x/blobs.pgm.tpfeat ${_mout}/in/${_long_b}.tpfeat && cp ${_mout}/x/blobs.pgm.tpfeat ${_mout}/in/a--b.tpfeat && cp ${_mout}/x/blobs.pgm.tpfeat ${_mout}/in/c.tpfeat && cp ${_mout}/x/blobs.pgm.tpfeat ${_mout}/in/a.tpfeat && cp ${_mout}/x/blobs.pgm.tpfeat ${_mout}/in/b--c.tpfeat")
set_tests_properties(cli.match.setup PROPERTIES FIXTURES_SETUP match_inputs)
set(_g1 ${_mout}/in/good1.tpfeat)
set(_g2 ${_mout}/in/good2.tpfeat)
function(_match_error name regex)
  add_test(NAME cli.match.${name}
           COMMAND ${_expect} 2 "${regex}" ${_mout}/${name}/summary.json
                   ${_mout}/${name}/good1--good2.tpmatch ${_mout}/${name}/good1--truncated.tpmatch --
                   ${_tp} match ${ARGN} -o ${_mout}/${name})
  set_tests_properties(cli.match.${name} PROPERTIES FIXTURES_REQUIRED match_inputs)
endfunction()
_match_error(truncated "truncated.tpfeat: truncated feature file" ${_g1} ${_g2} ${_mout}/in/truncated.tpfeat)
_match_error(not_features "notfeatures.tpfeat: not a tiepoint feature file" ${_g1} ${_mout}/in/notfeatures.tpfeat)
_match_error(missing "nosuch.tpfeat: cannot open" ${_g1} ${_mout}/in/nosuch.tpfeat)
_match_error(same_name "both named 'good1' in them.; give a folder that holds both" ${_g1} ${_mout}/in/sub/good1.tpfeat)
_match_error(long_name "the pair's output name '${_long_a}--${_long_b}.tpmatch' is 270 bytes, more than a file name may have"
             ${_mout}/in/${_long_a}.tpfeat ${_mout}/in/${_long_b}.tpfeat)
_match_error(same_output "the pairs .*a--b.tpfeat, .*c.tpfeat and .*a.tpfeat, .*b--c.tpfeat would both be written to 'a--b--c.tpmatch'"
             ${_mout}/in/a--b.tpfeat ${_mout}/in/c.tpfeat ${_mout}/in/a.tpfeat ${_mout}/in/b--c.tpfeat)
_match_error(same_file "good1.tpfeat: the same feature file given twice" ${_g1} ${_g1})
_match_error(pairs_unknown "pairs_unknown.txt:1: 'nosuch' is not one of the feature files" ${_g1} ${_g2} --pairs ${_mout}/in/pairs_unknown.txt)
_match_error(bad_pairs_spec "--pairs 'sequential:x'" ${_g1} ${_g2} --pairs sequential:x)
_match_error(essential_no_intrinsics "--verify essential needs --intrinsics" ${_g1} ${_g2} --verify essential)
_match_error(intrinsics_missing_image "intrinsics_other.txt: no intrinsics for image 'good1'" ${_g1} ${_g2} --verify essential --intrinsics ${_mout}/in/intrinsics_other.txt)
_match_error(bad_model "--verify: .*'affine'" ${_g1} ${_g2} --verify affine)
_match_error(bad_ratio "ratio 1.5" ${_g1} ${_g2} --ratio 1.5)
_match_error(bad_device "--device 'gpu'" ${_g1} ${_g2} --device gpu)
_match_error(one_file "at least two feature files" ${_g1})
_match_error(bad_verify_device "--verify-device 'gpu'" ${_g1} ${_g2} --verify fundamental --verify-device gpu)
_match_error(verify_device_model "--verify-device cuda searches fundamental matrices only" ${_g1} ${_g2} --verify homography --verify-device cuda)
add_test(NAME cli.match.help COMMAND ${_tp} match --help)
