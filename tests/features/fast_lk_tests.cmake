# FAST + grid suppression and LK tracking (features/fast.h, lk.h, frontend.h): CPU
# references in CI, CUDA comparisons skip without a GPU; `tiepoint track` CLI tests.
tiepoint_add_test(fast_test features/fast_test.cc LIBS tiepoint_fastlk)
tiepoint_add_test(lk_test features/lk_test.cc LIBS tiepoint_fastlk)
