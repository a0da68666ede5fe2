# `tiepoint render-scene`: the synthetic scene's views and cameras, and bad options.
set(_tp $<TARGET_FILE:tiepoint>)
set(_expect ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect.sh)
set(_rout ${CMAKE_CURRENT_BINARY_DIR}/cli_render_out)
file(MAKE_DIRECTORY ${_rout})

add_test(NAME cli.render_scene.writes_views_and_cameras
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/render_scene.sh ${_tp} ${_rout}/scene)
add_test(NAME cli.render_scene.bad_views
         COMMAND ${_expect} 2 "num_views 1" ${_rout}/bad/scene_par.txt -- ${_tp} render-scene -o ${_rout}/bad --views 1)
add_test(NAME cli.render_scene.bad_size
         COMMAND ${_expect} 2 "image size" ${_rout}/bad/scene_par.txt -- ${_tp} render-scene -o ${_rout}/bad --width 4)
add_test(NAME cli.render_scene.not_a_number
         COMMAND ${_expect} 2 "--views" ${_rout}/bad/scene_par.txt -- ${_tp} render-scene -o ${_rout}/bad --views many)
add_test(NAME cli.render_scene.missing_output
         COMMAND ${_expect} 2 "--output" -- ${_tp} render-scene --views 3)
add_test(NAME cli.render_scene.unwritable_output
         COMMAND ${_expect} 2 "/proc/tiepoint-scene" -- ${_tp} render-scene -o /proc/tiepoint-scene --views 2 --width 32 --height 32)
add_test(NAME cli.render_scene.help COMMAND ${_tp} render-scene --help)
