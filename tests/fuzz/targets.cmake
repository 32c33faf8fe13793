# The fuzz targets and the library each one needs; read by tests/fuzz/CMakeLists.txt (the fuzzers)
# and tests/CMakeLists.txt (their replay tests); VL_FUZZ_SRC_<target> names other sources of a
# target, relative to tests/fuzz/.
set(VL_FUZZ_TARGETS sse response jsonscan jsonscan_diff image units config prom)
set(VL_FUZZ_LIB_sse vlbase)
set(VL_FUZZ_LIB_response vlcore)
set(VL_FUZZ_LIB_jsonscan vlcore)
set(VL_FUZZ_LIB_jsonscan_diff vlcore)
set(VL_FUZZ_LIB_image vlcore)
set(VL_FUZZ_LIB_units vlbase)
set(VL_FUZZ_LIB_config vlcore)
set(VL_FUZZ_LIB_prom vlcore)
# The scanner before its bulk paths, which the shipped one is held to.
set(VL_FUZZ_SRC_jsonscan_diff jsonscan_ref.c)
