# Tests of features/ beyond sift_test (registered in tests/CMakeLists.txt): included from
# tests/cli_extract_tests.cmake so that features/ owns its test list.
# The CUDA SIFT against the CPU reference; skips without a GPU.
tiepoint_add_test(sift_cuda_test features/sift_cuda_test.cc LIBS tiepoint_features LABELS gpu)
