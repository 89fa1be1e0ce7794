# ember_precompile(<target> <header>...): compiles the heavy third-party headers (CLI11 ~5.6 s,
# nlohmann/json ~2 s, gtest ~1.4 s per translation unit) once per target instead of in every file.
# Only for targets with several files that include them; -DEMBER_PCH=OFF turns it off.
option(EMBER_PCH "Precompile heavy third-party headers per target" ON)
function(ember_precompile target)
  if(EMBER_PCH)
    target_precompile_headers(${target} PRIVATE ${ARGN})
  endif()
endfunction()
# ember_reuse_pch(<target> <from>): <target> uses <from>'s precompiled headers; both must be compiled
# with the same options and definitions.
function(ember_reuse_pch target from)
  if(EMBER_PCH)
    target_precompile_headers(${target} REUSE_FROM ${from})
  endif()
endfunction()
