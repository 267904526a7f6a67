// An empty program that makes the executables' precompiled LibTorch headers (CMakeLists.txt,
// tfw_executable_pch): the test suites and the benchmarks reuse them.
int main() { return 0; }
