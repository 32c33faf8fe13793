# The fuzz targets and the library each one needs; read by tests/fuzz/CMakeLists.txt (the fuzzers)
# and tests/CMakeLists.txt (their replay tests).
set(VL_FUZZ_TARGETS sse response image units config prom)
set(VL_FUZZ_LIB_sse vlbase)
set(VL_FUZZ_LIB_response vlcore)
set(VL_FUZZ_LIB_image vlcore)
set(VL_FUZZ_LIB_units vlbase)
set(VL_FUZZ_LIB_config vlcore)
set(VL_FUZZ_LIB_prom vlcore)
