// sluice-load: the load-test driver. Placeholder until the load-driver issue;
// it says so instead of pretending to run anything.
#include <cstdio>

int main() {
  std::fprintf(stderr, "sluice-load: not implemented yet (see the load-driver issue)\n");
  return 3;
}
