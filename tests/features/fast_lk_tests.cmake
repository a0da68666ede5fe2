# FAST + grid suppression and LK tracking (features/fast.h, lk.h, frontend.h): CPU
# references in CI, CUDA comparisons skip without a GPU; `tiepoint track` CLI tests.
tiepoint_add_test(fast_test features/fast_test.cc LIBS tiepoint_fastlk)
tiepoint_add_test(lk_test features/lk_test.cc LIBS tiepoint_fastlk)

# `tiepoint track`: outputs, bad frames (exit 2, named, no partial output), bad options.
set(_tp $<TARGET_FILE:tiepoint>)
set(_expect ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect.sh)
set(_tout ${CMAKE_CURRENT_BINARY_DIR}/cli_track_out)
set(_frame ${CMAKE_CURRENT_SOURCE_DIR}/data/images/blobs.pgm)
file(MAKE_DIRECTORY ${_tout} ${_tout}/bad)
add_test(NAME cli.track.sequence
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/track_sequence.sh ${_tp} ${_tout}/sequence ${_frame})
add_test(NAME cli.track.bad_frame
         COMMAND ${_expect} 2 "truncated.png: corrupt or truncated PNG" ${_tout}/bad/tracks.txt
                 ${_tout}/bad/svg/blobs.pgm.svg --
                 ${_tp} track ${_frame} ${CMAKE_CURRENT_SOURCE_DIR}/data/bad_images/truncated.png
                 -o ${_tout}/bad/tracks.txt --svg ${_tout}/bad/svg)
add_test(NAME cli.track.missing_frame
         COMMAND ${_expect} 2 "no-such-frame.png.*No such file" ${_tout}/missing.txt --
                 ${_tp} track ${_frame} ${_tout}/no-such-frame.png -o ${_tout}/missing.txt)
add_test(NAME cli.track.bad_cell
         COMMAND ${_expect} 2 "FAST cell width 48: expected a multiple of 32" ${_tout}/cell.txt --
                 ${_tp} track ${_frame} --cell 48x32 -o ${_tout}/cell.txt)
add_test(NAME cli.track.bad_arc
         COMMAND ${_expect} 2 "arc length 13" ${_tout}/arc.txt --
                 ${_tp} track ${_frame} --fast-arc 13 -o ${_tout}/arc.txt)
add_test(NAME cli.track.unwritable_output
         COMMAND ${_expect} 2 "/proc/tiepoint-tracks" -- ${_tp} track ${_frame} -o /proc/tiepoint-tracks/t.txt)
add_test(NAME cli.track.help COMMAND ${_tp} track --help)
# `tiepoint extract --detector fast`: DIR/<image>.txt, header "<N> 0", N lines "x y scale 0".
add_test(NAME cli.extract.fast
         COMMAND bash -c "rm -rf \"$2\" && \"$1\" extract \"$3\" --detector fast --fast-threshold 10 -o \"$2\" >/dev/null && n=$(awk 'NR==1 && $2==0 {print $1}' \"$2/blobs.pgm.txt\") && [ \"$n\" -gt 0 ] && [ $(wc -l < \"$2/blobs.pgm.txt\") = $((n + 1)) ] && awk 'NR>1 && (NF!=4 || $4!=0) {exit 1}' \"$2/blobs.pgm.txt\" && [ ! -e \"$2/blobs.pgm.tpfeat\" ]"
                 _ ${_tp} ${_tout}/extract_fast ${_frame})
