# `tiepoint reconstruct` (issue 16) through the command line, on a scene tiepoint renders.
add_test(NAME cli.reconstruct.end_to_end
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/reconstruct.sh $<TARGET_FILE:tiepoint>
                 $<TARGET_FILE:sfm_eval> ${CMAKE_CURRENT_BINARY_DIR}/cli_out/reconstruct)
set_tests_properties(cli.reconstruct.end_to_end PROPERTIES TIMEOUT 300)
# Features and matches from `tiepoint extract` / `tiepoint match` folders (--features, --matches).
add_test(NAME cli.reconstruct.stored_correspondences
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/reconstruct_stored.sh $<TARGET_FILE:tiepoint>
                 $<TARGET_FILE:sfm_eval> ${CMAKE_CURRENT_BINARY_DIR}/cli_out/reconstruct_stored)
set_tests_properties(cli.reconstruct.stored_correspondences PROPERTIES TIMEOUT 300)
# Sequence mode: `tiepoint track` output (--tracks) on rendered frames, and bad tracks files.
add_test(NAME cli.reconstruct.tracks
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/reconstruct_tracks.sh $<TARGET_FILE:tiepoint>
                 $<TARGET_FILE:sfm_eval> ${CMAKE_CURRENT_BINARY_DIR}/cli_out/reconstruct_tracks)
set_tests_properties(cli.reconstruct.tracks PROPERTIES TIMEOUT 300)
# `tiepoint ba MODEL_DIR`: a COLMAP model adjusted as COLMAP's bundle_adjuster does.
add_test(NAME cli.ba.colmap_model
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cli/ba_model.sh $<TARGET_FILE:tiepoint>
                 $<TARGET_FILE:sfm_eval> ${CMAKE_CURRENT_BINARY_DIR}/cli_out/ba_model)
set_tests_properties(cli.ba.colmap_model PROPERTIES TIMEOUT 300)
