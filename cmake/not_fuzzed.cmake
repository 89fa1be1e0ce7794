# ember_not_fuzzed(<target>): in the sanitizer tree (EMBER_FUZZ), code that no fuzzer links (the
# unit tests, the ember app) skips libFuzzer's coverage instrumentation and line tables, a fifth of
# its compile time there (server_test: 83 -> 68 s). The libraries keep both, so sanitizer reports
# still give file and line wherever the libraries are at fault.
function(ember_not_fuzzed target)
  if(EMBER_FUZZ)
    target_compile_options(${target} PRIVATE -fno-sanitize=fuzzer-no-link -g0)
  endif()
endfunction()
