// The one source of Tessera's shared libraries (cmake/SharedLibraries.cmake):
// their code comes whole from the static archives; this adds an identifying
// string, so `strings libtessera.so | grep Tessera` tells which release a
// deployed library is.
[[gnu::used]] static const char kTesseraIdent[] = "Tessera " TESSERA_VERSION " (" TESSERA_LIBRARY ")";
