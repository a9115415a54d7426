// The program that carries the test programs' precompiled header (tests/CMakeLists.txt).
int main() { return 0; }
