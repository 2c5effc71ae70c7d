// Anchor for the shared precompiled header (see CMakeLists.txt).
