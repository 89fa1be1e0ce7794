# cmake -DINPUT=file -DOUTPUT=file.cc -DFUNCTION=name -P embed.cmake
# Writes a C++ source defining `std::string_view ember::server::web::<FUNCTION>()` with the file's bytes
# (in <FUNCTION>_data: the files of a unity build share one namespace).
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by embed.cmake; do not edit.\n"
  "#include \"server/web_assets.h\"\n\nnamespace ember::server::web {\n"
  "namespace {\nconstexpr char ${FUNCTION}_data[] = {${bytes} '\\0'};\n}  // namespace\n"
  "std::string_view ${FUNCTION}() { return {${FUNCTION}_data, sizeof(${FUNCTION}_data) - 1}; }\n"
  "}  // namespace ember::server::web\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
