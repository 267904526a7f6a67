// One thread a test (tests/CMakeLists.txt, TFW_TEST_ONE_THREAD): before main, OMP_NUM_THREADS=1,
// as ctest sets it for the script tests, so that tfw's default thread count
// (engine/machine/cores.h) is 1 in this process and in the tfw processes it starts. ctest -j2
// runs two tests on two cores; a second thread would only wait at barriers. Linked into each
// GoogleTest suite that trains or starts tfw, but not the GPU suite. Tests of the fused kernels'
// split between threads take two (tests/support.h, TwoThreads).
#include <cstdlib>

namespace tfw::test::one_thread {

const bool kSet = [] { return setenv("OMP_NUM_THREADS", "1", 1) == 0; }();

}  // namespace tfw::test::one_thread
