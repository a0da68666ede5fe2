# `tiepoint extract`: per-image outputs, a batch that goes on past bad images (exit 2),
# messages naming the file, no partial output, unavailable detector and device.
set(_tp $<TARGET_FILE:tiepoint>)
set(_expect ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect.sh)
set(_xout ${CMAKE_CURRENT_BINARY_DIR}/cli_extract_out)
set(_good ${CMAKE_CURRENT_SOURCE_DIR}/data/images/blobs.pgm)
file(MAKE_DIRECTORY ${_xout})

file(GLOB _bad_images ${CMAKE_CURRENT_SOURCE_DIR}/data/bad_images/*.png
                      ${CMAKE_CURRENT_SOURCE_DIR}/data/bad_images/*.jpg
                      ${CMAKE_CURRENT_SOURCE_DIR}/data/bad_images/*.pgm)
foreach(_file ${_bad_images})
  get_filename_component(_name ${_file} NAME)
  add_test(NAME cli.extract.bad.${_name}
           COMMAND ${_expect} 2 "${_name}: .*(corrupt|truncated|absurd|zero-sized|empty|not a PNG)"
                   ${_xout}/bad/${_name}.tpfeat ${_xout}/bad/${_name}.txt --
                   ${_tp} extract ${_file} -o ${_xout}/bad --txt)
endforeach()

add_test(NAME cli.extract.batch
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/extract_batch.sh ${_tp} ${_xout}/batch ${_good}
                 ${CMAKE_CURRENT_SOURCE_DIR}/data/bad_images/truncated.png)
add_test(NAME cli.extract.missing_image
         COMMAND ${_expect} 2 "no-such-image.png.*No such file" ${_xout}/missing/no-such-image.png.tpfeat --
                 ${_tp} extract ${_xout}/no-such-image.png -o ${_xout}/missing)
add_test(NAME cli.extract.fast_bad_cell
         COMMAND ${_expect} 2 "--cell 'x32'" ${_xout}/fast/blobs.pgm.txt --
                 ${_tp} extract ${_good} --detector fast --cell x32 -o ${_xout}/fast)
add_test(NAME cli.extract.unknown_detector
         COMMAND ${_expect} 2 "--detector 'orb'" -- ${_tp} extract ${_good} --detector orb -o ${_xout}/orb)
add_test(NAME cli.extract.bad_device
         COMMAND ${_expect} 2 "--device 'gpu'" -- ${_tp} extract ${_good} --device gpu -o ${_xout}/gpu)
add_test(NAME cli.extract.device_cuda
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/extract_cuda.sh ${_tp} ${_good} ${_xout}/cuda)
add_test(NAME cli.extract.unwritable_output
         COMMAND ${_expect} 2 "/proc/tiepoint-out" -- ${_tp} extract ${_good} -o /proc/tiepoint-out)
add_test(NAME cli.extract.help COMMAND ${_tp} extract --help)
# --max-image-size: SIFT on the shrunk image, features in the full image's pixels (a mapping
# half a pixel off finds 30% of the large blobs at full size instead of 83%).
add_test(NAME cli.extract.max_image_size
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/extract_shrunk.sh ${_tp} ${_xout}/shrunk)
add_test(NAME cli.extract.bad_max_image_size
         COMMAND ${_expect} 2 "--max-image-size 8: must be 0" ${_xout}/tiny/blobs.pgm.tpfeat --
                 ${_tp} extract ${_good} --max-image-size 8 -o ${_xout}/tiny)
add_test(NAME cli.extract.fast_max_image_size
         COMMAND ${_expect} 2 "--max-image-size applies to --detector sift" ${_xout}/fastmax/blobs.pgm.txt --
                 ${_tp} extract ${_good} --detector fast --max-image-size 64 -o ${_xout}/fastmax)

# features/ tests beyond sift_test.
include(${CMAKE_CURRENT_SOURCE_DIR}/features/features_tests.cmake)
# --min-features (reconstruct's lowering of the contrast threshold): SIFT only, and its floor
# not above the threshold.
add_test(NAME cli.extract.fast_min_features
         COMMAND ${_expect} 2 "--min-features applies to --detector sift" ${_xout}/fastmin/blobs.pgm.txt --
                 ${_tp} extract ${_good} --detector fast --min-features 500 -o ${_xout}/fastmin)
add_test(NAME cli.extract.min_contrast_above
         COMMAND ${_expect} 2 "--min-contrast-threshold 0.05: above --contrast-threshold 0.04$" ${_xout}/minct/blobs.pgm.tpfeat --
                 ${_tp} extract ${_good} --min-features 500 --min-contrast-threshold 0.05 -o ${_xout}/minct)
