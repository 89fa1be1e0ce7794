// The translation unit that builds the precompiled headers all test targets share (ember_test_pch in
// tests/CMakeLists.txt); it has no code of its own.
